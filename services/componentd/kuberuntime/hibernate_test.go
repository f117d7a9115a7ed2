package kuberuntime

import (
	"maps"
	"slices"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestRender_HeldComponentsHave0ReplicasAndKeepTheirDisruptionBudgetsAndHashes(t *testing.T) {
	in, _ := testInputs(t, "held", api.HighlyAvailable, "1.34.4")
	in = withKarpenter(in)
	free := mustRender(t, in)
	in.Held = []string{api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}
	held := mustRender(t, in)

	if got := *held.StatefulSets[0].Spec.Replicas; got != 3 {
		t.Errorf("etcd replicas = %d, want 3", got)
	}
	for _, d := range held.Deployments {
		want := int32(Replicas(*d.Name, api.HighlyAvailable))
		if slices.Contains(in.Held, *d.Name) {
			want = 0
		}
		if got := *d.Spec.Replicas; got != want {
			t.Errorf("%s replicas = %d, want %d", *d.Name, got, want)
		}
	}
	if got := deployment(t, held, api.ComponentKubeAPIServer); got == nil || *got.Spec.Replicas != 2 {
		t.Errorf("kube-apiserver is not rendered with 2 replicas: %v", got)
	}
	pdbNames := func(o *Objects) []string {
		var names []string
		for _, p := range o.PodDisruptionBudgets {
			names = append(names, *p.Name)
		}
		return names
	}
	if got, want := pdbNames(held), pdbNames(free); !slices.Equal(got, want) || len(got) != 4 {
		t.Errorf("PodDisruptionBudgets while held %v, want the policy's %v (4)", got, want)
	}
	// Releasing the hold rolls nothing: only spec.replicas differs.
	if !maps.Equal(held.ConfigHashes, free.ConfigHashes) {
		t.Errorf("config hashes while held %v, want %v", held.ConfigHashes, free.ConfigHashes)
	}
}

func TestHeldOnWake_HoldsKubeAPIServersDependentsOnlyWhenWakingFromHibernation(t *testing.T) {
	dependents := []string{api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}
	// every is each component's workload with replicas and kube-apiserver Available or not.
	every := func(replicas int32, apiserverAvailable bool) map[string]ComponentStatus {
		m := map[string]ComponentStatus{}
		for _, c := range append(Components(), api.ComponentKarpenter) {
			m[c] = ComponentStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, Available: replicas > 0}
		}
		m[api.ComponentKubeAPIServer] = ComponentStatus{Replicas: replicas, Available: apiserverAvailable}
		return m
	}
	for _, tc := range []struct {
		name   string
		status map[string]ComponentStatus
		want   []string
	}{
		{"Create_NoWorkloadYet_HoldsNothing", map[string]ComponentStatus{}, nil},
		{"Hibernated_EveryWorkloadAt0_HoldsTheDependents", every(0, false), dependents},
		{"Waking_KubeAPIServerScaledBackNotAvailable_HoldsTheDependents", func() map[string]ComponentStatus {
			m := every(0, false)
			m[api.ComponentEtcd] = ComponentStatus{Replicas: 1}
			m[api.ComponentKubeAPIServer] = ComponentStatus{Replicas: 1}
			return m
		}(), dependents},
		{"Waking_WithoutTheAutoscaler_HoldsTheOthersOnly", func() map[string]ComponentStatus {
			m := every(0, false)
			delete(m, api.ComponentKarpenter)
			return m
		}(), dependents[:2]},
		{"Woken_KubeAPIServerAvailable_HoldsNothing", func() map[string]ComponentStatus {
			m := every(0, false)
			m[api.ComponentKubeAPIServer] = ComponentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, Available: true}
			return m
		}(), nil},
		{"Running_KubeAPIServerNotAvailable_ScalesNothingDown", every(1, false), nil},
		{"Created_DependentsRunKubeAPIServerNotReadyYet_HoldsNothing", func() map[string]ComponentStatus {
			m := every(1, false)
			m[api.ComponentKubeAPIServer] = ComponentStatus{Replicas: 1}
			return m
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HeldOnWake(tc.status); !slices.Equal(got, tc.want) {
				t.Errorf("HeldOnWake = %v, want %v", got, tc.want)
			}
		})
	}
}
