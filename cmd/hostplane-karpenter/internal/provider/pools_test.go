package provider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/hostplane/hostplane/pkg/api"
)

func deployment(ann map[string]string) *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "workers", Annotations: ann}}
}

// The annotations nodepoold writes on an autoscaled local.small pool (see its objects.go).
func smallPoolAnnotations() map[string]string {
	return map[string]string{
		clusterv1.AutoscalerMinSizeAnnotation: "1",
		clusterv1.AutoscalerMaxSizeAnnotation: "4",
		annotationCapacityCPU:                 "2",
		annotationCapacityMemory:              "4Gi",
		annotationCapacityMaxPods:             "30",
		annotationCapacityLabels: "hostplane.dev/nodepool=workers,karpenter.sh/capacity-type=on-demand,kubernetes.io/arch=amd64," +
			"kubernetes.io/os=linux,node.kubernetes.io/instance-type=local.small,tier=web",
		annotationCapacityTaints: "dedicated=web:NoSchedule",
	}
}

func TestPoolOf_ReadsBoundsShapeLabelsAndTaintsFromTheDeployment(t *testing.T) {
	p, ok, err := poolOf(deployment(smallPoolAnnotations()))
	if err != nil || !ok {
		t.Fatalf("poolOf: ok %v err %v", ok, err)
	}
	if p.min != 1 || p.max != 4 {
		t.Errorf("bounds %d..%d, want 1..4", p.min, p.max)
	}
	if p.labels["tier"] != "web" || p.labels[api.LabelNodePool] != "workers" {
		t.Errorf("labels %v", p.labels)
	}
	if len(p.taints) != 1 || p.taints[0] != (corev1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints %v", p.taints)
	}
	small, _ := api.LocalInstanceType("local.small")
	if p.it.Name != small.Name || p.it.Capacity.Cpu().Value() != 2 || p.it.Capacity.Pods().Value() != 30 {
		t.Errorf("instance type %s with %v", p.it.Name, p.it.Capacity)
	}
	if len(p.it.Offerings) != 1 || p.it.Offerings[0].Price != small.OnDemandPrice ||
		p.it.Offerings[0].Requirements.Get(corev1.LabelTopologyZone).Any() != small.Zones[0] ||
		p.it.Offerings[0].Requirements.Get(karpv1.CapacityTypeLabelKey).Any() != karpv1.CapacityTypeOnDemand {
		t.Errorf("offerings %v, want one on-demand offering in %s at %v", p.it.Offerings, small.Zones[0], small.OnDemandPrice)
	}
}

func TestPoolOf_SkipsFixedPoolsAndRejectsBadBounds(t *testing.T) {
	if _, ok, err := poolOf(deployment(nil)); ok || err != nil {
		t.Errorf("a deployment without bounds: ok %v err %v, want skipped", ok, err)
	}
	ann := smallPoolAnnotations()
	ann[clusterv1.AutoscalerMinSizeAnnotation] = "5"
	if _, _, err := poolOf(deployment(ann)); err == nil {
		t.Error("min above max was accepted")
	}
	ann = smallPoolAnnotations()
	ann[annotationCapacityLabels] = "node.kubernetes.io/instance-type=local.huge"
	if _, _, err := poolOf(deployment(ann)); err == nil {
		t.Error("an instance type outside the catalogue was accepted")
	}
}

func TestPoolOfClaim_NamesThePoolBehindAKarpenterNodePool(t *testing.T) {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.NodePoolLabelKey: KarpenterPoolName("workers")}}}
	if got := poolOfClaim(nc); got != "workers" {
		t.Errorf("pool %q, want workers", got)
	}
	nc.Labels[karpv1.NodePoolLabelKey] = "users-own"
	if got := poolOfClaim(nc); got != "" {
		t.Errorf("a user's Karpenter NodePool maps to pool %q, want none", got)
	}
}
