package kuberuntime

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
)

// Labels and annotations on every object this package writes.
const (
	// FieldManager is the server-side apply field manager.
	FieldManager = "hostplane-componentd"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "hostplane-componentd" // value of LabelManagedBy
	LabelCluster   = "hostplane.dev/cluster"
	LabelComponent = "hostplane.dev/component"
	// ComponentShared is the LabelComponent value of objects several components use (the
	// namespace, the root CA, the service-account key, the admin kubeconfig).
	ComponentShared = "control-plane"

	// AnnotationConfigHash on a pod template is the digest of everything that must roll
	// the component's pods when it changes.
	AnnotationConfigHash = "hostplane.dev/config-hash"

	// NamespacePrefix + cluster is a cluster's control-plane namespace.
	NamespacePrefix = api.ControlPlaneNamespacePrefix
)

// Ports the components listen on inside their pods.
const (
	EtcdClientPort         = 2379
	EtcdPeerPort           = 2380
	EtcdMetricsPort        = 2381 // plain HTTP: /livez, /readyz, /metrics
	APIServerPort          = api.KubeAPIServerServicePort
	ControllerManagerPort  = 10257
	SchedulerPort          = 10259
	EtcdDiscoveryService   = api.EtcdDiscoveryService // headless: one DNS name per etcd member
	APIServerService       = api.KubeAPIServerService
	defaultEtcdStorageSize = "8Gi"
)

// KarpenterMetricsPort and KarpenterHealthPort are the autoscaler's METRICS_PORT and
// HEALTH_PROBE_PORT (Karpenter's own defaults): fixed, as every pod has its own network.
const (
	KarpenterMetricsPort = 8080
	KarpenterHealthPort  = 8081
)

// Opener opens what pkid sealed; *certs.SealKey is one.
type Opener interface {
	Open(sealed []byte) ([]byte, error)
}

// Inputs is everything one cluster's control plane is rendered from.
type Inputs struct {
	Cluster string
	// Policy is api.SingleReplica (the default when empty) or api.HighlyAvailable.
	Policy string
	// Release gives the images of kube-apiserver, kube-controller-manager, kube-scheduler
	// and, for a new etcd, etcd.
	Release release.Release
	// PKI is the cluster's sealed PKI; Seal opens it.
	PKI  *api.ClusterPKI
	Seal Opener
	// ServiceCIDR and PodCIDR default to api.DefaultServiceCIDR and api.DefaultPodCIDR.
	ServiceCIDR, PodCIDR string
	// EtcdImage overrides Release.Images[etcd]. Runtime.Apply sets it to the running
	// StatefulSet's image when empty, so an upgrade does not roll etcd.
	EtcdImage string
	// EtcdStorage is each etcd member's volume size (default 8Gi); EtcdStorageClass its
	// storage class (default: the cluster's default class). Both are fixed once etcd exists.
	EtcdStorage      resource.Quantity
	EtcdStorageClass string
	// Audit is kube-apiserver's audit configuration; its zero fields are the defaults
	// (api.DefaultAudit).
	Audit api.Audit
	// Karpenter is the autoscaler (component karpenter): rendered only while Enabled.
	Karpenter Karpenter
	// Tuning selects which of the release catalogue's component settings the containers
	// run with (the zero value: all of them), as in the process runtime.
	Tuning release.Selection
	// Held lists components rendered with 0 replicas for now (a waking cluster's
	// dependents of kube-apiserver: see HeldOnWake). Their PodDisruptionBudgets stay as the
	// policy has them.
	Held []string
}

// Karpenter is what the autoscaler needs beyond the control plane's own inputs.
type Karpenter struct {
	// Enabled is true while the cluster has an autoscaled NodePool or the autonode pool:
	// the autoscaler's Deployment, ServiceAccount, Role and RoleBinding and its kubeconfig
	// Secret exist then, and are deleted otherwise.
	Enabled bool
	// Image holds /usr/local/bin/hostplane-karpenter (the componentd image does).
	Image string
	// Options are the cluster's spec.autoscaling with defaults (api.ClusterSpec.EffectiveAutoscaling).
	Options api.ClusterAutoscaling
}

// Namespace is cluster's control-plane namespace.
func Namespace(cluster string) string { return api.ControlPlaneNamespace(cluster) }

// APIServerHost is the DNS name of the kube-apiserver Service in cluster's namespace.
func APIServerHost(cluster string) string {
	return api.KubeAPIServerHost(cluster)
}

// EtcdMemberHosts are the DNS names of the etcd members of cluster under policy, in member
// order: what etcd-server and etcd-peer must cover.
func EtcdMemberHosts(cluster, policy string) []string {
	n := Replicas(api.ComponentEtcd, policy)
	hosts := make([]string, n)
	for i := range n {
		hosts[i] = etcdMemberName(i) + "." + api.EtcdDiscoveryHost(cluster)
	}
	return hosts
}

func etcdMemberName(i int) string { return api.ComponentEtcd + "-" + strconv.Itoa(i) }

// Replicas is how many replicas component runs under policy.
func Replicas(component, policy string) int {
	ha := policy == api.HighlyAvailable
	switch {
	case component == api.ComponentKarpenter:
		return 1 // Karpenter's decisions are not split
	case component == api.ComponentEtcd && ha:
		return 3
	case ha:
		return 2
	}
	return 1
}

// Components lists the components in start order. The autoscaler, rendered only while
// Inputs.Karpenter.Enabled, is not among them: see Workloads.
func Components() []string {
	return []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
}

// withDefaults validates in and fills its defaults.
func (in Inputs) withDefaults() (Inputs, error) {
	if in.Policy == "" {
		in.Policy = api.SingleReplica
	}
	if in.ServiceCIDR == "" {
		in.ServiceCIDR = api.DefaultServiceCIDR
	}
	if in.PodCIDR == "" {
		in.PodCIDR = api.DefaultPodCIDR
	}
	if in.EtcdStorage.IsZero() {
		in.EtcdStorage = resource.MustParse(defaultEtcdStorageSize)
	}
	if in.EtcdImage == "" {
		in.EtcdImage = in.Release.Images[api.ComponentEtcd]
	}
	in.Audit = in.Audit.WithDefaults()
	switch {
	case in.Cluster == "":
		return in, fmt.Errorf("%w: no cluster", ErrInvalidInputs)
	case len(validation.IsDNS1123Label(Namespace(in.Cluster))) > 0:
		return in, fmt.Errorf("%w: cluster %q does not make a namespace name: %v", ErrInvalidInputs,
			in.Cluster, validation.IsDNS1123Label(Namespace(in.Cluster)))
	case in.Policy != api.SingleReplica && in.Policy != api.HighlyAvailable:
		return in, fmt.Errorf("%w: availability policy %q (want %q or %q)", ErrInvalidInputs,
			in.Policy, api.SingleReplica, api.HighlyAvailable)
	case in.PKI == nil || in.Seal == nil:
		return in, fmt.Errorf("%w: no PKI or no seal key to open it", ErrInvalidInputs)
	case in.EtcdImage == "":
		return in, fmt.Errorf("%w: release %q has no etcd image", ErrInvalidInputs, in.Release.Version)
	case in.Karpenter.Enabled && in.Karpenter.Image == "":
		return in, fmt.Errorf("%w: the autoscaler is enabled but has no image", ErrInvalidInputs)
	}
	for _, c := range Components()[1:] {
		if in.Release.Images[c] == "" {
			return in, fmt.Errorf("%w: release %q has no %s image", ErrInvalidInputs, in.Release.Version, c)
		}
	}
	return in, nil
}
