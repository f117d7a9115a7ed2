package provider

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

func claim(cpu string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde"},
		Spec: karpv1.NodeClaimSpec{
			Requirements: reqs,
			Resources:    karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		},
	}
}

func req(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
		Key: key, Operator: corev1.NodeSelectorOpIn, Values: values,
	}}
}

// The machine Karpenter gets for a NodeClaim is the cheapest offering of the local catalogue
// its requirements allow whose type holds its requests.
func TestCheapest_PicksTheCheapestOfferingTheClaimAllows(t *testing.T) {
	onDemand := req(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand)
	amd64 := req(corev1.LabelArchStable, "amd64")
	tests := []struct {
		name            string
		nc              *karpv1.NodeClaim
		wantType, wantC string
		wantZone        string // "" for any
	}{
		{"no requirement: spot is cheapest, the small type holds 1 CPU", claim("1"), "local.small", karpv1.CapacityTypeSpot, ""},
		{"on-demand amd64 for 1 CPU", claim("1", onDemand, amd64), "local.small", karpv1.CapacityTypeOnDemand, ""},
		{"on-demand for 3 CPUs: the arm type is cheaper than local.medium", claim("3", onDemand), "local.arm.medium", karpv1.CapacityTypeOnDemand, ""},
		{"on-demand amd64 for 10 CPUs", claim("10", onDemand, amd64), "local.xlarge", karpv1.CapacityTypeOnDemand, ""},
		{"a zone the arm type lacks", claim("3", onDemand, req(corev1.LabelTopologyZone, "local-c")), "local.medium", karpv1.CapacityTypeOnDemand, "local-c"},
		{"instance types Karpenter narrowed down", claim("1", req(corev1.LabelInstanceTypeStable, "local.large", "local.medium")), "local.medium", karpv1.CapacityTypeSpot, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it, zone, ct, err := cheapest(tt.nc)
			if err != nil {
				t.Fatal(err)
			}
			if it.Name != tt.wantType || ct != tt.wantC || (tt.wantZone != "" && zone != tt.wantZone) {
				t.Fatalf("got %s %s in %s, want %s %s in %q", it.Name, ct, zone, tt.wantType, tt.wantC, tt.wantZone)
			}
		})
	}
}

func TestCheapest_NothingFits_IsInsufficientCapacity(t *testing.T) {
	for name, nc := range map[string]*karpv1.NodeClaim{
		"more CPU than any type":      claim("64"),
		"an instance type not listed": claim("1", req(corev1.LabelInstanceTypeStable, "m5.large")),
		"an arch not offered":         claim("1", req(corev1.LabelArchStable, "s390x")),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := cheapest(nc)
			if !cloudprovider.IsInsufficientCapacityError(err) {
				t.Fatalf("err = %v, want an insufficient capacity error", err)
			}
			if !strings.Contains(err.Error(), nc.Name) {
				t.Fatalf("err = %v, want it to name the NodeClaim", err)
			}
		})
	}
}
