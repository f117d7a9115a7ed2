package provider

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	"github.com/hostplane/hostplane/pkg/api"
)

// Annotations nodepoold writes on an autoscaled pool's MachineDeployment: Cluster API's
// autoscaler annotations, the pool's bounds and the shape of its nodes.
const (
	annotationCapacityCPU     = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	annotationCapacityMemory  = "capacity.cluster-autoscaler.kubernetes.io/memory"
	annotationCapacityMaxPods = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	annotationCapacityLabels  = "capacity.cluster-autoscaler.kubernetes.io/labels"
	annotationCapacityTaints  = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// KarpenterPoolPrefix starts the name of the karpenter.sh NodePool that stands for a Hostplane
// NodePool in the guest: "nodepool-<pool>".
const KarpenterPoolPrefix = "nodepool-"

// KarpenterPoolName is the karpenter.sh NodePool of the Hostplane NodePool called pool.
func KarpenterPoolName(pool string) string { return KarpenterPoolPrefix + pool }

// pool is an autoscaled Hostplane NodePool as its MachineDeployment describes it.
type pool struct {
	name     string
	md       *clusterv1.MachineDeployment
	min, max int32
	// labels are those every node of the pool registers with, taints those it carries.
	labels map[string]string
	taints []corev1.Taint
	it     *cloudprovider.InstanceType
}

// poolOf reads an autoscaled pool from its MachineDeployment; ok is false for a deployment
// that is not autoscaled (no bounds) or has no shape (a platform without instance types).
func poolOf(md *clusterv1.MachineDeployment) (*pool, bool, error) {
	ann := md.Annotations
	minS, okMin := ann[clusterv1.AutoscalerMinSizeAnnotation]
	maxS, okMax := ann[clusterv1.AutoscalerMaxSizeAnnotation]
	if !okMin || !okMax || ann[annotationCapacityCPU] == "" {
		return nil, false, nil
	}
	p := &pool{name: md.Name, md: md}
	lo, err1 := strconv.ParseInt(minS, 10, 32)
	hi, err2 := strconv.ParseInt(maxS, 10, 32)
	if err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return nil, false, fmt.Errorf("MachineDeployment %s: bounds %q..%q are not numbers with min ≤ max", md.Name, minS, maxS)
	}
	p.min, p.max = int32(lo), int32(hi)
	p.labels = map[string]string{}
	for _, kv := range strings.Split(ann[annotationCapacityLabels], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			p.labels[k] = v
		}
	}
	for _, s := range strings.Split(ann[annotationCapacityTaints], ",") {
		if s == "" {
			continue
		}
		kv, effect, _ := strings.Cut(s, ":")
		k, v, _ := strings.Cut(kv, "=")
		p.taints = append(p.taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	it, err := instanceType(p, ann)
	if err != nil {
		return nil, false, fmt.Errorf("MachineDeployment %s: %w", md.Name, err)
	}
	p.it = it
	return p, true, nil
}

// instanceType is the pool's one instance type as Karpenter sees it: the capacity nodepoold
// described, and one offering, on-demand in the zone infrad places the pool's machines in,
// at the catalogue's price.
func instanceType(p *pool, ann map[string]string) (*cloudprovider.InstanceType, error) {
	name := p.labels[api.LabelInstanceType]
	cat, ok := api.LocalInstanceType(name)
	if !ok {
		return nil, fmt.Errorf("instance type %q is not in the local catalogue", name)
	}
	cpu, err := resource.ParseQuantity(ann[annotationCapacityCPU])
	if err != nil {
		return nil, fmt.Errorf("capacity cpu: %w", err)
	}
	mem, err := resource.ParseQuantity(ann[annotationCapacityMemory])
	if err != nil {
		return nil, fmt.Errorf("capacity memory: %w", err)
	}
	pods, err := resource.ParseQuantity(ann[annotationCapacityMaxPods])
	if err != nil {
		return nil, fmt.Errorf("capacity maxPods: %w", err)
	}
	it := catalogueType(cat, cat.Zones[:1], []string{karpv1.CapacityTypeOnDemand})
	it.Capacity[corev1.ResourceCPU] = cpu
	it.Capacity[corev1.ResourceMemory] = mem
	it.Capacity[corev1.ResourcePods] = pods
	return it, nil
}

// poolOfClaim names the Hostplane NodePool a NodeClaim was made for ("" for a claim of a
// karpenter.sh NodePool that stands for none).
func poolOfClaim(nc *karpv1.NodeClaim) string {
	name, ok := strings.CutPrefix(nc.Labels[karpv1.NodePoolLabelKey], KarpenterPoolPrefix)
	if !ok {
		return ""
	}
	return name
}

// PoolView is what the guest's karpenter.sh NodePool of an autoscaled pool is shaped from.
type PoolView struct {
	Name, InstanceType string
	Min, Max           int32
	Labels             map[string]string
	Taints             []corev1.Taint
}

// view is what the guest's karpenter.sh NodePool of the pool is shaped from.
func (pl *pool) view() PoolView {
	return PoolView{Name: pl.name, InstanceType: pl.it.Name, Min: pl.min, Max: pl.max, Labels: pl.labels, Taints: pl.taints}
}
