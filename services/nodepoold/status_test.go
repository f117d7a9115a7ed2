package nodepoold

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/api"
)

func statusMachine(name string, age time.Duration, now time.Time, node string) clusterv1.Machine {
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	m.Spec.InfrastructureRef.Name = name
	m.Spec.Version = "v1.34.4"
	m.Status.NodeRef.Name = node
	m.Status.Phase = "Provisioned"
	return m
}

func TestStatus_NamesStuckMachinesAndWhy(t *testing.T) {
	d := &Daemon{cfg: Config{JoinGrace: 3 * time.Minute, CheckConfig: func(api.ConfigDocument) error { return nil }}}
	now := time.Now().UTC().Truncate(time.Second)
	three := int32(3)
	np := &api.NodePool{Cluster: "demo", Spec: api.NodePoolSpec{Replicas: &three, Release: api.Release{Version: "1.34.4"},
		Platform: api.NodePoolPlatform{Type: api.PlatformLocal}, Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace}}}
	np.Name, np.Generation = "workers", 1
	hash := ConfigHash(&np.Spec)
	secret := api.UserDataSecretName("workers", hash)
	notReady := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-b", Annotations: map[string]string{api.AnnotationCurrentConfig: hash}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.34.4"}}}
	ready := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-c", Annotations: map[string]string{api.AnnotationCurrentConfig: hash}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.34.4"}}}
	ms := []clusterv1.Machine{
		statusMachine("workers-a", 4*time.Minute, now, ""),
		statusMachine("workers-b", 10*time.Minute, now, "workers-b"),
		statusMachine("workers-c", 10*time.Minute, now, "workers-c"),
		statusMachine("workers-d", time.Minute, now, ""), // still within the join grace
	}
	for i := range ms {
		ms[i].Spec.Bootstrap.DataSecretName = &secret
	}
	s := &scope{np: np, hash: hash, now: now, desired: 3, userDataReady: true,
		template: &machineTemplate{Version: "v1.34.4", DataSecret: secret},
		state: &poolState{machines: ms,
			nodes: map[string]*corev1.Node{"workers-b": notReady, "workers-c": ready},
			infra: map[string]infraReport{"workers-a": {reason: "Booting", message: "ignition fetch: 401 Unauthorized"}}}}
	var st api.NodePoolStatus
	d.computeStatus(&st, s)

	if st.Replicas != 4 || st.ReadyReplicas != 1 || st.UpdatedReplicas != 4 || st.ObservedGeneration != 1 {
		t.Errorf("counts = %d/%d/%d, observed %d", st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.ObservedGeneration)
	}
	want := map[string]struct {
		status api.ConditionStatus
		says   []string
		not    []string
	}{
		api.NodePoolConditionReachedIgnitionEndpoint: {api.ConditionFalse,
			[]string{"machine workers-a: no node after 4m0s; the machine reports: Booting: ignition fetch: 401 Unauthorized"}, []string{"workers-d", "workers-b"}},
		api.NodePoolConditionAllNodesHealthy: {api.ConditionFalse,
			[]string{"machine workers-a: no node", "machine workers-b: node workers-b is not Ready (Unknown NodeStatusUnknown: Kubelet stopped posting node status.)"}, []string{"workers-c"}},
		api.NodePoolConditionReady:              {api.ConditionFalse, []string{"1 of 3 machines have a Ready node (4 machines exist)"}, nil},
		api.NodePoolConditionUpdatingConfig:     {api.ConditionFalse, nil, nil},
		api.NodePoolConditionUpdatingVersion:    {api.ConditionFalse, nil, nil},
		api.NodePoolConditionValidReleaseImage:  {api.ConditionTrue, nil, nil},
		api.NodePoolConditionAutoscalingEnabled: {api.ConditionFalse, []string{"fixed size of 3"}, nil},
	}
	for typ, w := range want {
		c, ok := st.Conditions.Get(typ)
		if !ok || c.Status != w.status {
			t.Errorf("%s = %+v, want %s", typ, c, w.status)
			continue
		}
		for _, s := range w.says {
			if !strings.Contains(c.Message, s) {
				t.Errorf("%s message %q does not say %q", typ, c.Message, s)
			}
		}
		for _, s := range w.not {
			if strings.Contains(c.Message, s) {
				t.Errorf("%s message %q names %s", typ, c.Message, s)
			}
		}
	}
	if st.Version != "" {
		t.Errorf("version = %q while two machines have no node", st.Version)
	}
}
