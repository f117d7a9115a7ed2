package provider

// Autoprovisioning (spec.autoNode): the NodeClaims of the karpenter.sh NodePools a cluster
// admin made in the guest become standalone Cluster API Machines, one each, of the instance
// type, zone and capacity type Karpenter's scheduling allows at the lowest price. Each Machine
// takes the autonode pool's release and userdata from that pool's (empty) MachineDeployment,
// carries the pool's label (so pkid approves its kubelet's CSR) and the NodeClaim's name, and
// points at a LocalMachine that says the shape: infrad launches it in the local cloud, it
// boots from ignitiond with the autonode pool's token and joins like any pool machine.

import (
	"context"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
)

// Annotations on a Machine of autoprovisioning: the offering Karpenter chose.
const (
	AnnotationZone         = "hostplane.dev/zone"
	AnnotationCapacityType = "hostplane.dev/capacity-type"
)

// Drift reasons of autoprovisioned machines.
const (
	// DriftRelease: the control plane moved to another release; the machine runs the old one.
	DriftRelease cloudprovider.DriftReason = "ReleaseDrifted"
	// DriftUserData: the autonode pool's userdata (its config) changed.
	DriftUserData cloudprovider.DriftReason = "UserDataDrifted"
)

// capacityTypes are the local platform's, with each one's price in the catalogue.
var capacityTypes = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}

// catalogueType is a local instance type as Karpenter sees it, offered in zones with
// capacity types (each zone × capacity type an offering at the catalogue's price).
func catalogueType(t api.InstanceType, zones, cts []string) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{
		Name: t.Name,
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, t.Name),
			scheduling.NewRequirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, t.Architecture),
			scheduling.NewRequirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
			scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...),
			scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...),
		),
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(int64(t.CPU), resource.DecimalSI),
			corev1.ResourceMemory:           resource.MustParse(t.Memory),
			corev1.ResourcePods:             *resource.NewQuantity(int64(t.MaxPods), resource.DecimalSI),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
		// The local cloud's kubelet reserves nothing: allocatable is capacity.
		Overhead: &cloudprovider.InstanceTypeOverhead{},
	}
	for _, z := range zones {
		for _, ct := range cts {
			price := t.OnDemandPrice
			if ct == karpv1.CapacityTypeSpot {
				price = t.SpotPrice
			}
			it.Offerings = append(it.Offerings, &cloudprovider.Offering{
				Requirements: scheduling.NewRequirements(
					scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, z),
					scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, ct),
				),
				Price:     price,
				Available: true,
			})
		}
	}
	return it
}

// catalogue is every local instance type in every zone and capacity type.
func catalogue() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, t := range api.LocalInstanceTypes() {
		out = append(out, catalogueType(t, t.Zones, capacityTypes))
	}
	return out
}

// autoNodeTemplate is what every autoprovisioned Machine gets from the autonode pool.
type autoNodeTemplate struct {
	version, dataSecret string
}

// autoNode reads the autonode pool's MachineDeployment; nil when autoprovisioning is off
// (no such pool, or it is being deleted) or its userdata is not there yet.
func (p *Provider) autoNode(ctx context.Context) (*autoNodeTemplate, error) {
	var md clusterv1.MachineDeployment
	err := p.cfg.Management.Get(ctx, types.NamespacedName{Namespace: p.cfg.Namespace, Name: api.AutoNodePoolName}, &md)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get MachineDeployment %s: %w", api.AutoNodePoolName, err)
	}
	if !md.DeletionTimestamp.IsZero() || md.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return nil, nil
	}
	return &autoNodeTemplate{version: md.Spec.Template.Spec.Version, dataSecret: *md.Spec.Template.Spec.Bootstrap.DataSecretName}, nil
}

// isAutoNode says whether m was launched for a NodeClaim of autoprovisioning.
func isAutoNode(m *clusterv1.Machine) bool {
	return m.Labels[api.LabelNodePool] == api.AutoNodePoolName && m.Annotations[AnnotationNodeClaim] != ""
}

// autoNodeType is the instance type of an autoprovisioned Machine: its one offering.
func autoNodeType(m *clusterv1.Machine) *cloudprovider.InstanceType {
	t, ok := api.LocalInstanceType(m.Labels[api.LabelMachineInstanceType])
	if !ok {
		return nil
	}
	return catalogueType(t, []string{m.Annotations[AnnotationZone]}, []string{m.Annotations[AnnotationCapacityType]})
}

// cheapest picks the cheapest offering of the catalogue that nc's requirements allow and whose
// type holds nc's requests.
func cheapest(nc *karpv1.NodeClaim) (*cloudprovider.InstanceType, string, string, error) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	var best *cloudprovider.InstanceType
	var zone, ct string
	price := math.Inf(1)
	for _, it := range catalogue() {
		if reqs.Compatible(it.Requirements, scheduling.AllowUndefinedWellKnownLabels) != nil ||
			!resources.Fits(nc.Spec.Resources.Requests, it.Allocatable()) {
			continue
		}
		for _, o := range it.Offerings.Available().Compatible(reqs) {
			if o.Price < price {
				best, price = it, o.Price
				zone = o.Requirements.Get(corev1.LabelTopologyZone).Any()
				ct = o.Requirements.Get(karpv1.CapacityTypeLabelKey).Any()
			}
		}
	}
	if best == nil {
		return nil, "", "", cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no local instance type, zone and capacity type meets the requirements of NodeClaim %s", nc.Name))
	}
	return best, zone, ct, nil
}

// createAutoNode launches a Machine for a NodeClaim of autoprovisioning.
func (p *Provider) createAutoNode(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	tmpl, err := p.autoNode(ctx)
	if err != nil {
		return nil, err
	}
	if tmpl == nil {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("autoprovisioning is off for cluster %s (or its userdata is not ready yet)", p.cfg.Cluster))
	}
	name := nc.Name
	// A Create retried after a crash finds the Machine it made.
	var existing clusterv1.Machine
	err = p.cfg.Management.Get(ctx, types.NamespacedName{Namespace: p.cfg.Namespace, Name: name}, &existing)
	switch {
	case err == nil && existing.Annotations[AnnotationNodeClaim] == nc.Name:
		return p.waitProviderID(ctx, autoNodeType(&existing), nc, name)
	case err == nil:
		return nil, fmt.Errorf("Machine %s exists and is not NodeClaim %s's", name, nc.Name)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Machine %s: %w", name, err)
	}
	it, zone, ct, err := cheapest(nc)
	if err != nil {
		return nil, err
	}
	done, err := p.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	labels := map[string]string{
		api.LabelCluster:             p.cfg.Cluster,
		api.LabelNodePool:            api.AutoNodePoolName,
		clusterv1.ClusterNameLabel:   p.cfg.Cluster,
		api.LabelMachineInstanceType: it.Name,
	}
	annotations := map[string]string{AnnotationNodeClaim: nc.Name, AnnotationZone: zone, AnnotationCapacityType: ct}

	lm := &infrav1.LocalMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.cfg.Namespace, Name: name, Labels: labels, Annotations: annotations},
		Spec:       infrav1.LocalMachineSpec{InstanceType: it.Name, Zone: zone, CapacityType: ct},
	}
	if err := p.cfg.Management.Create(ctx, lm); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create LocalMachine %s: %w", name, err)
	}
	secret := tmpl.dataSecret
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.cfg.Namespace, Name: name, Labels: labels, Annotations: annotations},
		Spec: clusterv1.MachineSpec{
			ClusterName: p.cfg.Cluster,
			Version:     tmpl.version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: &secret},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: api.InfrastructureGroup, Kind: api.KindLocalMachine, Name: name,
			},
		},
	}
	if err := p.cfg.Management.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create Machine %s: %w", name, err)
	}
	log.FromContext(ctx).Info("launched a machine for the nodeclaim", "machine", name, "instanceType", it.Name,
		"zone", zone, "capacityType", ct, "release", tmpl.version)
	return p.waitProviderID(ctx, autoNodeType(m), nc, name)
}

// autoNodeDrift says how an autoprovisioned Machine differs from what the autonode pool
// launches now ("" when it does not, or autoprovisioning is off).
func (p *Provider) autoNodeDrift(ctx context.Context, m *clusterv1.Machine) (cloudprovider.DriftReason, error) {
	tmpl, err := p.autoNode(ctx)
	if err != nil || tmpl == nil {
		return "", err
	}
	switch {
	case m.Spec.Version != tmpl.version:
		return DriftRelease, nil
	case m.Spec.Bootstrap.DataSecretName != nil && *m.Spec.Bootstrap.DataSecretName != tmpl.dataSecret:
		return DriftUserData, nil
	}
	return "", nil
}

// machineOfClaim finds the claimed Machine of nc (by name or provider ID).
func machineOfClaim(ms []clusterv1.Machine, nc *karpv1.NodeClaim) *clusterv1.Machine {
	i := slices.IndexFunc(ms, func(m clusterv1.Machine) bool {
		return m.Annotations[AnnotationNodeClaim] == nc.Name ||
			(nc.Status.ProviderID != "" && m.Spec.ProviderID == nc.Status.ProviderID)
	})
	if i < 0 {
		return nil
	}
	return &ms[i]
}
