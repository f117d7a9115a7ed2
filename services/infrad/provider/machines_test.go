package provider

import (
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/localcloud"
)

func TestIdentify_PrefersTheProviderIDThenTheMachineThenTheLocalMachine(t *testing.T) {
	owned := metav1.ObjectMeta{
		Namespace: "hostplane-demo", Name: "lm-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "workers-a"}},
	}
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "workers-a", Labels: map[string]string{
		clusterv1.ClusterNameLabel: "demo", api.LabelNodePool: "workers",
	}}}
	for _, tt := range []struct {
		name string
		lm   infrav1.LocalMachine
		m    *clusterv1.Machine
		want machineID
	}{
		{"provisioned", infrav1.LocalMachine{ObjectMeta: owned, Spec: infrav1.LocalMachineSpec{ProviderID: "local://other/workers-z"}}, machine, machineID{"other", "workers-z", "workers"}},
		{"from its Machine", infrav1.LocalMachine{ObjectMeta: owned}, machine, machineID{"demo", "workers-a", "workers"}},
		{"Machine gone", infrav1.LocalMachine{ObjectMeta: owned}, nil, machineID{"demo", "workers-a", ""}},
		{"no owner yet", infrav1.LocalMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "hostplane-demo", Name: "lm-1"}}, nil, machineID{"demo", "lm-1", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := identify(&tt.lm, tt.m); got != tt.want {
				t.Errorf("identify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestObserve_ReadyOnlyWhileRunningAndTheNodeIsKeptOnceJoined(t *testing.T) {
	s := &machineScope{lm: &infrav1.LocalMachine{}, log: slog.New(slog.DiscardHandler)}
	steps := []struct {
		st         localcloud.MachineStatus
		wantReady  metav1.ConditionStatus
		wantReason string
		wantNode   string
	}{
		{localcloud.MachineStatus{State: localcloud.StateBooting, NodeName: "workers-a"}, metav1.ConditionFalse, localcloud.StateBooting, ""},
		{localcloud.MachineStatus{State: localcloud.StateRunning, NodeName: "workers-a", ConfigHash: "abc"}, metav1.ConditionTrue, localcloud.StateRunning, "workers-a"},
		{localcloud.MachineStatus{State: localcloud.StateStopped, Fault: api.FaultCrash}, metav1.ConditionFalse, localcloud.StateStopped, "workers-a"},
	}
	for i, step := range steps {
		before := s.lm.Status
		s.observe(step.st)
		c := meta.FindStatusCondition(s.lm.Status.Conditions, infrav1.ConditionReady)
		if c == nil || c.Status != step.wantReady || c.Reason != step.wantReason || c.Message == "" && step.wantReady == metav1.ConditionFalse {
			t.Errorf("step %d: Ready condition %+v, want %s/%s with a message", i, c, step.wantReady, step.wantReason)
		}
		if s.lm.Status.NodeName != step.wantNode {
			t.Errorf("step %d: nodeName %q, want %q", i, s.lm.Status.NodeName, step.wantNode)
		}
		if !statusChanged(before, s.lm.Status) {
			t.Errorf("step %d: status change not noticed", i)
		}
	}
}

func TestMachineView_JoinsTheMachineWithTheCloudsReport(t *testing.T) {
	created := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "workers-a", CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{api.LabelNodePool: "workers"}},
		Spec:       clusterv1.MachineSpec{Version: "v1.34.4"},
		Status:     clusterv1.MachineStatus{Phase: "Running", NodeRef: clusterv1.MachineNodeReference{Name: "workers-a"}},
	}
	st := &localcloud.MachineStatus{Name: "workers-a", ProviderID: "local://demo/workers-a", ConfigHash: "abc", Fault: api.FaultStopHeartbeats, Message: "silent", CreatedAt: created.Add(time.Second)}
	got := machineView("demo", m, st)
	want := api.Machine{Name: "workers-a", Cluster: "demo", NodePool: "workers", Phase: "Running", NodeName: "workers-a",
		ProviderID: "local://demo/workers-a", Version: "v1.34.4", ConfigHash: "abc", Fault: api.FaultStopHeartbeats, Message: "silent", CreatedAt: created}
	if got != want {
		t.Errorf("machineView =\n%+v, want\n%+v", got, want)
	}
	if only := machineView("demo", nil, st); only.Name != "workers-a" || !only.CreatedAt.Equal(st.CreatedAt) {
		t.Errorf("machineView without a Machine = %+v", only)
	}
}
