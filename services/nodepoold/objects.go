package nodepoold

import (
	"encoding/base64"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

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

// GroupVersionKinds of the objects nodepoold reads and writes as unstructured.
var (
	gvkSecret               = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	gvkLocalMachineTemplate = schema.GroupVersionKind{Group: api.InfrastructureGroup, Version: api.InfrastructureVersion, Kind: api.KindLocalMachineTemplate}
	gvkLocalMachine         = schema.GroupVersionKind{Group: api.InfrastructureGroup, Version: api.InfrastructureVersion, Kind: api.KindLocalMachine}
	gvkMachineDeployment    = clusterv1.GroupVersion.WithKind("MachineDeployment")
	gvkMachineSet           = clusterv1.GroupVersion.WithKind("MachineSet")
	gvkMachineHealthCheck   = clusterv1.GroupVersion.WithKind("MachineHealthCheck")
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
func (o objects) labels() map[string]any {
	return map[string]any{
		api.LabelOwner:             Name,
		api.LabelCluster:           o.np.Cluster,
		api.LabelNodePool:          o.np.Name,
		clusterv1.ClusterNameLabel: o.np.Cluster,
	}
}

// machineLabels are the labels every Machine (and LocalMachine) of the pool carries: pkid
// approves a kubelet's CSR only for a Machine whose hostplane.dev/nodepool matches the
// bootstrap token's group.
func (o objects) machineLabels() map[string]any {
	return map[string]any{
		api.LabelCluster:           o.np.Cluster,
		api.LabelNodePool:          o.np.Name,
		clusterv1.ClusterNameLabel: o.np.Cluster,
	}
}

func (o objects) object(gvk schema.GroupVersionKind, name string, body map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: body}
	u.SetGroupVersionKind(gvk)
	u.SetName(name)
	u.SetNamespace(o.ns)
	md, _ := u.Object["metadata"].(map[string]any)
	md["labels"] = o.labels()
	return u
}

// userDataSecret is the bootstrap data Secret of hash with ignitiond's stub.
func (o objects) userDataSecret(hash string, userData []byte) *unstructured.Unstructured {
	u := o.object(gvkSecret, api.UserDataSecretName(o.np.Name, hash), map[string]any{
		"type": SecretTypeBootstrap,
		"data": map[string]any{
			"value":  base64.StdEncoding.EncodeToString(userData),
			"format": base64.StdEncoding.EncodeToString([]byte(UserDataFormat)),
		},
	})
	u.SetAnnotations(map[string]string{AnnotationConfigHash: hash})
	return u
}

// localMachineTemplate is infrad's template: the instance type of t. It changes only with
// the machine template (a new instance type is a new config hash), so the machines it
// reaches are those of the rollout that change starts.
func (o objects) localMachineTemplate(t machineTemplate) *unstructured.Unstructured {
	spec := map[string]any{}
	if t.InstanceType != "" {
		spec["instanceType"] = t.InstanceType
	}
	return o.object(gvkLocalMachineTemplate, o.np.Name, map[string]any{
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{"labels": o.machineLabels()},
				"spec":     spec,
			},
		},
	})
}

// machineTemplateSpec is the template of the pool's Machines; extra labels select them.
func (o objects) machineTemplateSpec(t machineTemplate, extra map[string]any) map[string]any {
	lbls := o.machineLabels()
	for k, v := range extra {
		lbls[k] = v
	}
	if t.InstanceType != "" {
		lbls[api.LabelMachineInstanceType] = t.InstanceType
	}
	spec := map[string]any{
		"clusterName": o.np.Cluster,
		"version":     t.Version,
		"bootstrap":   map[string]any{"dataSecretName": t.DataSecret},
		"infrastructureRef": map[string]any{
			"apiGroup": api.InfrastructureGroup,
			"kind":     api.KindLocalMachineTemplate,
			"name":     o.np.Name,
		},
	}
	deletion := map[string]any{}
	if s, ok := seconds(o.np.Spec.NodeDrainTimeout); ok {
		deletion["nodeDrainTimeoutSeconds"] = s
	}
	if s, ok := seconds(o.np.Spec.NodeVolumeDetachTimeout); ok {
		deletion["nodeVolumeDetachTimeoutSeconds"] = s
	}
	if len(deletion) > 0 {
		spec["deletion"] = deletion
	}
	return map[string]any{"metadata": map[string]any{"labels": lbls}, "spec": spec}
}

// machineDeployment is the Replace pool's MachineDeployment, with the defaults Cluster API's
// webhook would set. replicas is the size to apply (for an autoscaled pool the current size
// clamped into its bounds: the autoscaler owns it within them).
func (o objects) machineDeployment(t machineTemplate, replicas int32) *unstructured.Unstructured {
	selector := map[string]any{
		clusterv1.ClusterNameLabel:           o.np.Cluster,
		clusterv1.MachineDeploymentNameLabel: o.np.Name,
	}
	rollout := map[string]any{"type": string(clusterv1.RollingUpdateMachineDeploymentStrategyType)}
	if r := o.np.Spec.Management.Replace; r != nil && r.Strategy == api.ReplaceStrategyOnDelete {
		rollout = map[string]any{"type": string(clusterv1.OnDeleteMachineDeploymentStrategyType)}
	} else {
		surge, unavailable := api.DefaultMaxSurge, api.DefaultMaxUnavailable
		if r != nil && r.RollingUpdate != nil {
			if r.RollingUpdate.MaxSurge != nil {
				surge = *r.RollingUpdate.MaxSurge
			}
			if r.RollingUpdate.MaxUnavailable != nil {
				unavailable = *r.RollingUpdate.MaxUnavailable
			}
		}
		rollout["rollingUpdate"] = map[string]any{"maxSurge": int64(surge), "maxUnavailable": int64(unavailable)}
	}
	u := o.object(gvkMachineDeployment, o.np.Name, map[string]any{
		"spec": map[string]any{
			"clusterName": o.np.Cluster,
			"replicas":    int64(replicas),
			"rollout":     map[string]any{"strategy": rollout},
			"selector":    map[string]any{"matchLabels": selector},
			"template":    o.machineTemplateSpec(t, selector),
		},
	})
	o.autoscalerAnnotations(u, t)
	return u
}

// machineSet is the InPlace pool's MachineSet: a new template only reaches new machines; the
// in-place updater moves the existing ones.
func (o objects) machineSet(t machineTemplate, replicas int32) *unstructured.Unstructured {
	selector := map[string]any{
		clusterv1.ClusterNameLabel:    o.np.Cluster,
		clusterv1.MachineSetNameLabel: o.np.Name,
	}
	u := o.object(gvkMachineSet, o.np.Name, map[string]any{
		"spec": map[string]any{
			"clusterName": o.np.Cluster,
			"replicas":    int64(replicas),
			"selector":    map[string]any{"matchLabels": selector},
			"template":    o.machineTemplateSpec(t, selector),
		},
	})
	o.autoscalerAnnotations(u, t)
	return u
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

// autoscalerAnnotations marks an autoscaled pool's bounds for the Cluster API autoscaler
// and, on platform local, the shape of its nodes (scaleFromZeroAnnotations).
func (o objects) autoscalerAnnotations(u *unstructured.Unstructured, t machineTemplate) {
	a := o.np.Spec.AutoScaling
	if a == nil {
		return
	}
	ann := map[string]string{
		clusterv1.AutoscalerMinSizeAnnotation: itoa(a.Min),
		clusterv1.AutoscalerMaxSizeAnnotation: itoa(a.Max),
	}
	maps.Copy(ann, o.scaleFromZeroAnnotations(t))
	u.SetAnnotations(ann)
}

// scaleFromZeroAnnotations describe a node of the pool's instance type (that of the template
// applied, so the autoscaler's picture matches the machines it would get): its capacity, the
// labels it registers with (the well-known ones, the pool label and the pool's node labels;
// not the zone, which differs between a pool's machines) and the pool's taints. Nil off
// platform local.
func (o objects) scaleFromZeroAnnotations(t machineTemplate) map[string]string {
	it, ok := api.LocalInstanceType(t.InstanceType)
	if o.np.Spec.Platform.Type != api.PlatformLocal || !ok {
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
func (o objects) machineHealthCheck() *unstructured.Unstructured {
	notReady := defaultNodeNotReadyTimeout
	if o.np.Spec.Platform.Type == api.PlatformNone {
		notReady = defaultNodeNotReadyTimeoutNone
	}
	startup := defaultNodeStartupTimeout
	maxUnhealthy := int64(defaultMaxUnhealthy)
	if p := o.np.Spec.Management.AutoRepairPolicy; p != nil {
		if d, err := time.ParseDuration(p.NodeNotReadyTimeout); err == nil && d > 0 {
			notReady = d
		}
		if d, err := time.ParseDuration(p.NodeStartupTimeout); err == nil && d > 0 {
			startup = d
		}
		if p.MaxUnhealthy != nil {
			maxUnhealthy = int64(*p.MaxUnhealthy)
		}
	}
	notReadySeconds := int64(notReady / time.Second)
	return o.object(gvkMachineHealthCheck, o.np.Name, map[string]any{
		"spec": map[string]any{
			"clusterName": o.np.Cluster,
			"selector": map[string]any{"matchLabels": map[string]any{
				clusterv1.ClusterNameLabel: o.np.Cluster,
				api.LabelNodePool:          o.np.Name,
			}},
			"checks": map[string]any{
				"nodeStartupTimeoutSeconds": int64(startup / time.Second),
				"unhealthyNodeConditions": []any{
					map[string]any{"type": "Ready", "status": "False", "timeoutSeconds": notReadySeconds},
					map[string]any{"type": "Ready", "status": "Unknown", "timeoutSeconds": notReadySeconds},
				},
			},
			"remediation": map[string]any{"triggerIf": map[string]any{"unhealthyLessThanOrEqualTo": maxUnhealthy}},
		},
	})
}

// seconds converts a set Go duration to whole seconds (at least 1 for a positive one).
func seconds(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	n := int64(d / time.Second)
	if d > 0 && n == 0 {
		n = 1
	}
	return n, true
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }
