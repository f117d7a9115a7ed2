package nodepoold

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
)

// The management objects of a pool, all named after it in its cluster's namespace (written
// with server-side apply, field manager "nodepoold"):
//
//	Secret <np>-userdata-<hash8>           the Ignition stub of one config hash (api.UserDataSecretName)
//	LocalMachineTemplate <np>              infrad's machine template (the instance type)
//	MachineDeployment <np>                 upgradeType Replace
//	MachineSet <np>                        upgradeType InPlace
//	MachineHealthCheck <np>                autoRepair

// Names of the objects nodepoold writes besides Cluster API's.
const (
	// UserDataFormat is the bootstrap data format of the userdata Secrets (key "format").
	UserDataFormat = "ignition"
	// SecretTypeBootstrap is Cluster API's Secret type for bootstrap data.
	SecretTypeBootstrap = "cluster.x-k8s.io/secret"
	// AnnotationConfigHash on a userdata Secret is the full config hash it carries.
	AnnotationConfigHash = "hostplane.dev/config-hash"
)

// HyperShift's MachineHealthCheck defaults (docs/nodepool-flow.md).
const (
	defaultNodeNotReadyTimeout     = 8 * time.Minute
	defaultNodeNotReadyTimeoutNone = 16 * time.Minute
	defaultNodeStartupTimeout      = 20 * time.Minute
	defaultMaxUnhealthy            = 2
)

// machineTemplate is what the pool's machines boot: the release, the userdata Secret and the
// instance type. They move together, only once ignitiond's userdata of a config hash (which
// covers the instance type) is ready.
type machineTemplate struct {
	Version      string // "v1.34.4"
	DataSecret   string // api.UserDataSecretName
	InstanceType string // "local.medium"; "" on a template written before instance types
}

// objects builds the management objects of one pool.
type objects struct {
	np *api.NodePool
	ns string
}

func newObjects(np *api.NodePool) objects {
	return objects{np: np, ns: api.ControlPlaneNamespace(np.Cluster)}
}

// labels are the labels of every object nodepoold writes for the pool.
func (o objects) labels() map[string]string {
	return map[string]string{
		api.LabelOwner:             Name,
		api.LabelCluster:           o.np.Cluster,
		api.LabelNodePool:          o.np.Name,
		clusterv1.ClusterNameLabel: o.np.Cluster,
	}
}

// machineLabels are the labels every Machine (and LocalMachine) of the pool carries: pkid
// approves a kubelet's CSR only for a Machine whose hostplane.dev/nodepool matches the
// bootstrap token's group.
func (o objects) machineLabels() map[string]string {
	return map[string]string{
		api.LabelCluster:           o.np.Cluster,
		api.LabelNodePool:          o.np.Name,
		clusterv1.ClusterNameLabel: o.np.Cluster,
	}
}

// meta is the metadata of the pool's object called name.
func (o objects) meta(name string, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.ns, Labels: o.labels(), Annotations: annotations}
}

// userDataSecret is the bootstrap data Secret of hash with ignitiond's stub.
func (o objects) userDataSecret(hash string, userData []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: o.meta(api.UserDataSecretName(o.np.Name, hash), map[string]string{AnnotationConfigHash: hash}),
		Type:       SecretTypeBootstrap,
		Data:       map[string][]byte{"value": userData, "format": []byte(UserDataFormat)},
	}
}

// localMachineTemplate is infrad's template: the instance type of t. It changes only with
// the machine template (a new instance type is a new config hash), so the machines it
// reaches are those of the rollout that change starts.
func (o objects) localMachineTemplate(t machineTemplate) *infrav1.LocalMachineTemplate {
	return &infrav1.LocalMachineTemplate{
		ObjectMeta: o.meta(o.np.Name, nil),
		Spec: infrav1.LocalMachineTemplateSpec{Template: infrav1.LocalMachineTemplateResource{
			ObjectMeta: clusterv1.ObjectMeta{Labels: o.machineLabels()},
			Spec:       infrav1.LocalMachineSpec{InstanceType: t.InstanceType},
		}},
	}
}

// machineTemplateSpec is the template of the pool's Machines; selector labels select them.
func (o objects) machineTemplateSpec(t machineTemplate, selector map[string]string) clusterv1.MachineTemplateSpec {
	lbls := o.machineLabels()
	maps.Copy(lbls, selector)
	if t.InstanceType != "" {
		lbls[api.LabelMachineInstanceType] = t.InstanceType
	}
	return clusterv1.MachineTemplateSpec{
		ObjectMeta: clusterv1.ObjectMeta{Labels: lbls},
		Spec: clusterv1.MachineSpec{
			ClusterName: o.np.Cluster,
			Version:     t.Version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(t.DataSecret)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: api.InfrastructureGroup, Kind: api.KindLocalMachineTemplate, Name: o.np.Name,
			},
			Deletion: clusterv1.MachineDeletionSpec{
				NodeDrainTimeoutSeconds:        seconds(o.np.Spec.NodeDrainTimeout),
				NodeVolumeDetachTimeoutSeconds: seconds(o.np.Spec.NodeVolumeDetachTimeout),
			},
		},
	}
}

// machineDeployment is the Replace pool's MachineDeployment, with the defaults Cluster API's
// webhook would set. replicas is the size to apply (for an autoscaled pool the current size
// clamped into its bounds: the autoscaler owns it within them).
func (o objects) machineDeployment(t machineTemplate, replicas int32) *clusterv1.MachineDeployment {
	selector := map[string]string{
		clusterv1.ClusterNameLabel:           o.np.Cluster,
		clusterv1.MachineDeploymentNameLabel: o.np.Name,
	}
	strategy := clusterv1.MachineDeploymentRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType}
	if r := o.np.Spec.Management.Replace; r != nil && r.Strategy == api.ReplaceStrategyOnDelete {
		strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	} else {
		surge, unavailable := api.DefaultMaxSurge, api.DefaultMaxUnavailable
		if r != nil && r.RollingUpdate != nil {
			surge = ptr.Deref(r.RollingUpdate.MaxSurge, surge)
			unavailable = ptr.Deref(r.RollingUpdate.MaxUnavailable, unavailable)
		}
		strategy.RollingUpdate = clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
			MaxSurge: ptr.To(intstr.FromInt32(surge)), MaxUnavailable: ptr.To(intstr.FromInt32(unavailable)),
		}
	}
	return &clusterv1.MachineDeployment{
		ObjectMeta: o.meta(o.np.Name, o.autoscalerAnnotations(t)),
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: o.np.Cluster,
			Replicas:    ptr.To(replicas),
			Rollout:     clusterv1.MachineDeploymentRolloutSpec{Strategy: strategy},
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Template:    o.machineTemplateSpec(t, selector),
		},
	}
}

// machineSet is the InPlace pool's MachineSet: a new template only reaches new machines; the
// in-place updater moves the existing ones.
func (o objects) machineSet(t machineTemplate, replicas int32) *clusterv1.MachineSet {
	selector := map[string]string{
		clusterv1.ClusterNameLabel:    o.np.Cluster,
		clusterv1.MachineSetNameLabel: o.np.Name,
	}
	return &clusterv1.MachineSet{
		ObjectMeta: o.meta(o.np.Name, o.autoscalerAnnotations(t)),
		Spec: clusterv1.MachineSetSpec{
			ClusterName: o.np.Cluster,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Template:    o.machineTemplateSpec(t, selector),
		},
	}
}

// Annotations of Cluster API's autoscaler provider that describe a node of a pool at size
// zero ("scale from zero": there is no Node to read the shape from).
const (
	AnnotationCapacityCPU     = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	AnnotationCapacityMemory  = "capacity.cluster-autoscaler.kubernetes.io/memory"
	AnnotationCapacityMaxPods = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	AnnotationCapacityLabels  = "capacity.cluster-autoscaler.kubernetes.io/labels"
	AnnotationCapacityTaints  = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// autoscalerAnnotations mark an autoscaled pool's bounds for the Cluster API autoscaler
// and, on platform local, the shape of its nodes (scaleFromZeroAnnotations). Nil for a
// fixed-size pool.
func (o objects) autoscalerAnnotations(t machineTemplate) map[string]string {
	a := o.np.Spec.AutoScaling
	if a == nil {
		return nil
	}
	ann := map[string]string{
		clusterv1.AutoscalerMinSizeAnnotation: itoa(a.Min),
		clusterv1.AutoscalerMaxSizeAnnotation: itoa(a.Max),
	}
	maps.Copy(ann, o.scaleFromZeroAnnotations(t))
	return ann
}

// scaleFromZeroAnnotations describe a node of the pool's instance type (that of the template
// applied, so the autoscaler's picture matches the machines it would get): its capacity, the
// labels it registers with (the well-known ones, the pool label and the pool's node labels;
// not the zone, which differs between a pool's machines) and the pool's taints. Nil off
// platform local.
func (o objects) scaleFromZeroAnnotations(t machineTemplate) map[string]string {
	it, ok := api.LocalInstanceType(t.InstanceType)
	if !api.ProvidesMachines(o.np.Spec.Platform.Type) || !ok {
		return nil
	}
	labels := maps.Clone(o.np.Spec.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{
		api.LabelInstanceType: it.Name,
		api.LabelArch:         it.Architecture,
		api.LabelOS:           "linux",
		api.LabelCapacityType: api.CapacityTypeOnDemand,
		api.LabelNodePool:     o.np.Name,
	})
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	taints := make([]string, 0, len(o.np.Spec.Taints))
	for _, tn := range o.np.Spec.Taints {
		taints = append(taints, tn.Key+"="+tn.Value+":"+tn.Effect)
	}
	ann := map[string]string{
		AnnotationCapacityCPU:     itoa(it.CPU),
		AnnotationCapacityMemory:  it.Memory,
		AnnotationCapacityMaxPods: itoa(it.MaxPods),
		AnnotationCapacityLabels:  strings.Join(pairs, ","),
	}
	if len(taints) > 0 {
		ann[AnnotationCapacityTaints] = strings.Join(taints, ",")
	}
	return ann
}

// machineHealthCheck is the autoRepair pool's MachineHealthCheck: HyperShift's defaults with
// the pool's overrides.
func (o objects) machineHealthCheck() *clusterv1.MachineHealthCheck {
	notReady := defaultNodeNotReadyTimeout
	if o.np.Spec.Platform.Type == api.PlatformNone {
		notReady = defaultNodeNotReadyTimeoutNone
	}
	startup := defaultNodeStartupTimeout
	maxUnhealthy := int32(defaultMaxUnhealthy)
	if p := o.np.Spec.Management.AutoRepairPolicy; p != nil {
		if d, err := time.ParseDuration(p.NodeNotReadyTimeout); err == nil && d > 0 {
			notReady = d
		}
		if d, err := time.ParseDuration(p.NodeStartupTimeout); err == nil && d > 0 {
			startup = d
		}
		maxUnhealthy = ptr.Deref(p.MaxUnhealthy, maxUnhealthy)
	}
	notReadySeconds := ptr.To(int32(notReady / time.Second))
	return &clusterv1.MachineHealthCheck{
		ObjectMeta: o.meta(o.np.Name, nil),
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: o.np.Cluster,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				clusterv1.ClusterNameLabel: o.np.Cluster,
				api.LabelNodePool:          o.np.Name,
			}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To(int32(startup / time.Second)),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: notReadySeconds},
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: notReadySeconds},
				},
			},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromInt32(maxUnhealthy)),
			}},
		},
	}
}

// seconds converts a set Go duration to whole seconds (at least 1 for a positive one); nil
// when unset or invalid.
func seconds(s string) *int32 {
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil
	}
	n := int32(d / time.Second)
	if d > 0 && n == 0 {
		n = 1
	}
	return &n
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }
