package join_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/localcloud"
	"github.com/hostplane/hostplane/services/localcloud/localcloudtest"
)

// A machine of an instance type registers a Node with that type's capacity and well-known
// labels, and the guest's real kube-scheduler holds it to them: a pod asking for more CPU
// than the node has stays Pending, one that fits runs.
func TestMachine_NodeReportsItsInstanceType_AndTheSchedulerHonoursItsCapacity(t *testing.T) {
	g := startGuest(t, "itypes")
	ctx := t.Context()
	kc := bootstrap(t, g)
	ign := localcloudtest.NewIgnitionServer(t)
	ign.Set(t, "t1", localcloudtest.NodePayload(t, kc, g.REST.CAData, localcloud.KubeletConfig{
		NodeLabels:     map[string]string{"pool": poolName},
		ConfigHash:     "hash-1",
		KubeletVersion: "v" + g.Release.Version,
	}))
	sockDir, err := os.MkdirTemp("", "lc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	cl, _ := runCloud(t, t.TempDir(), "unix://"+filepath.Join(sockDir, "cloud.sock"))

	small, _ := api.LocalInstanceType("local.small")
	const name = "workers-small"
	st, err := cl.Create(ctx, localcloud.MachineSpec{Cluster: g.Name, Name: name, NodePool: poolName,
		UserData: ign.Stub(t, "t1"), ProviderID: api.ProviderID(g.Name, name), InstanceType: small.Name})
	if err != nil {
		t.Fatal(err)
	}
	if st.InstanceType != small.Name || st.Zone != small.Zones[0] || st.CapacityType != api.CapacityTypeOnDemand {
		t.Fatalf("created %+v, want %s in %s, on-demand", st, small.Name, small.Zones[0])
	}
	node := readyNode(t, g, name)

	want := map[string]string{
		api.LabelInstanceType: small.Name, corev1.LabelInstanceType: small.Name, api.LabelZone: small.Zones[0],
		api.LabelArch: small.Architecture, api.LabelOS: "linux", api.LabelCapacityType: api.CapacityTypeOnDemand,
		"pool": poolName, corev1.LabelHostname: name,
	}
	for l, v := range want {
		if node.Labels[l] != v {
			t.Errorf("node label %s = %q, want %q", l, node.Labels[l], v)
		}
	}
	mem := resource.MustParse(small.Memory)
	for _, rl := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		if rl.Cpu().Value() != int64(small.CPU) || !rl.Memory().Equal(mem) || rl.Pods().Value() != int64(small.MaxPods) {
			t.Errorf("node resources %v, want cpu %d, memory %s, pods %d", rl, small.CPU, small.Memory, small.MaxPods)
		}
	}
	if node.Status.NodeInfo.Architecture != small.Architecture {
		t.Errorf("node architecture %q, want %q", node.Status.NodeInfo.Architecture, small.Architecture)
	}

	pods := g.Admin.CoreV1().Pods("default")
	mkPod := func(podName, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}}
	}
	for _, p := range []*corev1.Pod{mkPod("too-big", "3"), mkPod("fits", "1500m")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var p *corev1.Pod
	testenv.Eventually(t, joinWait, func() bool {
		p, err = pods.Get(ctx, "fits", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == name
	}, "the pod that fits runs on %s; last %+v, %v", name, p, err)
	testenv.Eventually(t, joinWait, func() bool {
		p, err = pods.Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	}, "the scheduler finds no room for 3 CPUs on a %s; last %+v, %v", small.Name, p, err)
	if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
		t.Errorf("the pod too big for the node: phase %s on %q, want Pending and unbound", p.Status.Phase, p.Spec.NodeName)
	}
}
