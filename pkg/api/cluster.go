package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cluster is a HostedCluster: "I want a Kubernetes control plane at release X on platform P".
// clusterd owns it (bucket "clusters", key = name).
type Cluster struct {
	ObjectMeta
	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status"`
}

// Availability policies.
const (
	SingleReplica      = "SingleReplica"
	HighlyAvailable    = "HighlyAvailable"
	PlatformLocal      = "local"
	PlatformNone       = "none"
	PlatformDocker     = "docker"
	DefaultServiceCIDR = "10.96.0.0/16"
	DefaultPodCIDR     = "10.132.0.0/14"
)

// ClusterSpec is what the user asks for. Field names follow HyperShift's HostedCluster.
type ClusterSpec struct {
	Release                      Release    `json:"release"`
	Platform                     Platform   `json:"platform"`
	ControllerAvailabilityPolicy string     `json:"controllerAvailabilityPolicy,omitempty"`
	Networking                   Networking `json:"networking,omitempty"`
	PKI                          *PKISpec   `json:"pki,omitempty"`
	// Configuration tunes the control plane's components (HyperShift's spec.configuration).
	Configuration *ClusterConfiguration `json:"configuration,omitempty"`
	// SecretEncryption says how the guest cluster's kube-apiserver encrypts Secrets in its
	// etcd. Absent means the default, aescbc (see SecretEncryptionType).
	SecretEncryption *SecretEncryptionSpec `json:"secretEncryption,omitempty"`
	// Autoscaling tunes how the cluster's autoscaled NodePools grow and shrink (HyperShift's
	// spec.autoscaling). Absent means the defaults (see ClusterAutoscaling).
	Autoscaling *ClusterAutoscaling `json:"autoscaling,omitempty"`
	// AutoNode turns on autoprovisioning (HyperShift's spec.autoNode): Karpenter runs as a
	// control-plane component and launches machines for the karpenter.sh NodePools a
	// cluster admin creates in the guest, with no Hostplane NodePool behind them.
	AutoNode *AutoNode `json:"autoNode,omitempty"`
	// Etcd schedules the cluster's etcd backups (spec.etcd.backup).
	Etcd *EtcdSpec `json:"etcd,omitempty"`
	// RestoreFrom starts a new cluster's etcd from a complete backup of another (or a
	// deleted) cluster; set at creation only (docs/backups.md).
	RestoreFrom *RestoreSource `json:"restoreFrom,omitempty"`
	// Hibernation hibernates the cluster on request, on schedules or when idle
	// (docs/hibernation.md).
	Hibernation *Hibernation `json:"hibernation,omitempty"`
}

// AutoNode is spec.autoNode.
type AutoNode struct {
	ProvisionerConfig ProvisionerConfig `json:"provisionerConfig"`
}

// ProvisionerConfig names the autoprovisioner; ProvisionerKarpenter is the only one.
type ProvisionerConfig struct {
	Name string `json:"name"`
}

// ProvisionerKarpenter is spec.autoNode.provisionerConfig.name for Karpenter.
const ProvisionerKarpenter = "Karpenter"

// AutoNodePoolName is the node pool nodepoold keeps for a cluster with autoprovisioning: the
// bootstrap identity, userdata and release of the machines Karpenter launches. Users cannot
// create, change or delete a pool of that name.
const AutoNodePoolName = "autonode"

// AutoNodeEnabled says whether Karpenter autoprovisions machines for the cluster.
func (s *ClusterSpec) AutoNodeEnabled() bool {
	return s.AutoNode != nil && s.AutoNode.ProvisionerConfig.Name == ProvisionerKarpenter
}

// Scaling modes of spec.autoscaling.scaling (HyperShift's names).
const (
	// ScaleUpAndScaleDown grows autoscaled pools for pods that cannot be scheduled and
	// shrinks them when nodes are unneeded. The default.
	ScaleUpAndScaleDown = "ScaleUpAndScaleDown"
	// ScaleUpOnly grows autoscaled pools and never shrinks them.
	ScaleUpOnly = "ScaleUpOnly"
)

// DefaultUnneededDurationSeconds is how long a node is empty or under-used before an
// autoscaled pool gives it up, when spec.autoscaling.scaleDown does not say (the upstream
// cluster-autoscaler's --scale-down-unneeded-time).
const DefaultUnneededDurationSeconds = 600

// ClusterAutoscaling is spec.autoscaling: the cluster-wide options of NodePool autoscaling.
type ClusterAutoscaling struct {
	// Scaling is ScaleUpAndScaleDown (default) or ScaleUpOnly.
	Scaling string `json:"scaling,omitempty"`
	// ScaleDown tunes scale-down; ignored with ScaleUpOnly.
	ScaleDown *ScaleDownConfig `json:"scaleDown,omitempty"`
	// MaxNodesTotal bounds the cluster's machines, every pool's and autoprovisioning's
	// together: the autoscaler adds none beyond it (absent: no bound but the pools' max).
	MaxNodesTotal *int32 `json:"maxNodesTotal,omitempty"`
	// MaxPodGracePeriodSeconds bounds how long a node the autoscaler removes waits for its
	// pods to end (default 600).
	MaxPodGracePeriodSeconds *int32 `json:"maxPodGracePeriod,omitempty"`
	// MaxNodeProvisionTime is how long the autoscaler waits for a machine it asked for to be
	// provisioned before it gives up on it and tries again ("15m", the default).
	MaxNodeProvisionTime string `json:"maxNodeProvisionTime,omitempty"`
}

// Defaults of spec.autoscaling's bounds (the upstream cluster-autoscaler's).
const (
	DefaultMaxPodGracePeriodSeconds = 600
	DefaultMaxNodeProvisionTime     = "15m"
)

// ScaleDownConfig is spec.autoscaling.scaleDown.
type ScaleDownConfig struct {
	// UnneededDurationSeconds is how long a node added by the autoscaler is empty or
	// under-used (its pods fit elsewhere) before it is drained and removed (default 600).
	UnneededDurationSeconds *int32 `json:"unneededDurationSeconds,omitempty"`
}

// EffectiveAutoscaling returns spec.autoscaling with its defaults filled in.
func (s *ClusterSpec) EffectiveAutoscaling() ClusterAutoscaling {
	out := ClusterAutoscaling{Scaling: ScaleUpAndScaleDown}
	unneeded := int32(DefaultUnneededDurationSeconds)
	if a := s.Autoscaling; a != nil {
		if a.Scaling != "" {
			out.Scaling = a.Scaling
		}
		if a.ScaleDown != nil && a.ScaleDown.UnneededDurationSeconds != nil {
			unneeded = *a.ScaleDown.UnneededDurationSeconds
		}
	}
	out.ScaleDown = &ScaleDownConfig{UnneededDurationSeconds: &unneeded}
	grace := int32(DefaultMaxPodGracePeriodSeconds)
	out.MaxNodeProvisionTime = DefaultMaxNodeProvisionTime
	if a := s.Autoscaling; a != nil {
		out.MaxNodesTotal = a.MaxNodesTotal
		if a.MaxPodGracePeriodSeconds != nil {
			grace = *a.MaxPodGracePeriodSeconds
		}
		if a.MaxNodeProvisionTime != "" {
			out.MaxNodeProvisionTime = a.MaxNodeProvisionTime
		}
	}
	out.MaxPodGracePeriodSeconds = &grace
	return out
}

// AutoscalerFlags are the command-line settings of the autoscaler (cmd/hostplane-karpenter)
// that come from these options, defaults filled in (a is EffectiveAutoscaling's).
func (a ClusterAutoscaling) AutoscalerFlags() []string {
	unneeded := time.Duration(DefaultUnneededDurationSeconds) * time.Second
	if sd := a.ScaleDown; sd != nil && sd.UnneededDurationSeconds != nil {
		unneeded = time.Duration(*sd.UnneededDurationSeconds) * time.Second
	}
	flags := []string{
		"--scale-down=" + strconv.FormatBool(a.Scaling != ScaleUpOnly),
		"--unneeded-time=" + unneeded.String(),
	}
	if a.MaxNodesTotal != nil {
		flags = append(flags, "--max-nodes-total="+strconv.Itoa(int(*a.MaxNodesTotal)))
	}
	if g := a.MaxPodGracePeriodSeconds; g != nil {
		flags = append(flags, "--max-pod-grace-period="+(time.Duration(*g)*time.Second).String())
	}
	if t := a.MaxNodeProvisionTime; t != "" {
		flags = append(flags, "--max-node-provision-time="+t)
	}
	return flags
}

// Release names a Kubernetes version in the release catalogue.
type Release struct {
	Version string `json:"version"`
}

// Platform is where the cluster's machines run.
type Platform struct {
	Type string `json:"type"`
}

// Networking holds the cluster's CIDRs.
type Networking struct {
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	PodCIDR     string `json:"podCIDR,omitempty"`
}

// PKISpec tunes certificate lifetimes (Go durations, e.g. "8760h"; tests use minutes):
// CALifetime from MinCALifetime to MaxCALifetime, LeafLifetime from MinLeafLifetime to
// MaxLeafLifetime and shorter than the CA's.
type PKISpec struct {
	CALifetime   string `json:"caLifetime,omitempty"`
	LeafLifetime string `json:"leafLifetime,omitempty"`
}

// Ranges of PKISpec's lifetimes. A leaf is renewed at 2/3 of its lifetime and every renewal
// rolls the control plane, so a leaf shorter than 10 minutes would keep it rolling.
const (
	MinCALifetime   = time.Hour
	MaxCALifetime   = 20 * 365 * 24 * time.Hour
	MinLeafLifetime = 10 * time.Minute
	MaxLeafLifetime = 10 * 365 * 24 * time.Hour
)

// Secret encryption types (spec.secretEncryption.type; HyperShift's names).
const (
	// SecretEncryptionAESCBC: kube-apiserver encrypts Secrets with a per-cluster 32-byte AES
	// key (the aescbc provider) that pkid generates and keeps sealed in the cluster's PKI.
	// The default.
	SecretEncryptionAESCBC = "aescbc"
	// SecretEncryptionKMS is the plug point for an external key management service (a KMS
	// v2 plugin). No platform supports it yet: validation refuses it.
	SecretEncryptionKMS = "kms"
)

// SecretEncryptionSpec is spec.secretEncryption: how Secrets are encrypted at rest in the
// guest cluster's etcd. Every provider list ends with identity, so data written before
// encryption was on stays readable.
type SecretEncryptionSpec struct {
	// Type is "aescbc" (the default) or "kms" (refused for now).
	Type string `json:"type"`
}

// SecretEncryptionType is the encryption type the cluster uses: spec.secretEncryption.type,
// or SecretEncryptionAESCBC when absent (clusters stored before the field existed too).
func (s *ClusterSpec) SecretEncryptionType() string {
	if s.SecretEncryption == nil || s.SecretEncryption.Type == "" {
		return SecretEncryptionAESCBC
	}
	return s.SecretEncryption.Type
}

// ClusterStatus is clusterd's aggregate of every daemon's state for the cluster.
type ClusterStatus struct {
	ObservedGeneration   int64          `json:"observedGeneration,omitempty"`
	Conditions           Conditions     `json:"conditions,omitempty"`
	Version              *VersionStatus `json:"version,omitempty"`
	ControlPlaneEndpoint *Endpoint      `json:"controlPlaneEndpoint,omitempty"`
	IgnitionEndpoint     string         `json:"ignitionEndpoint,omitempty"`
	KubeconfigAvailable  bool           `json:"kubeconfigAvailable,omitempty"`
	// Hibernation says why and when spec.hibernation.enabled last changed.
	Hibernation *HibernationStatus `json:"hibernation,omitempty"`
}

// VersionStatus is the desired release and the history of rollouts to it, newest first.
type VersionStatus struct {
	Desired Release         `json:"desired"`
	History []UpdateHistory `json:"history,omitempty"`
}

// UpdateHistory is one rollout; State is "Partial" until every component runs Version.
type UpdateHistory struct {
	Version        string     `json:"version"`
	State          string     `json:"state"`
	StartedTime    time.Time  `json:"startedTime"`
	CompletionTime *time.Time `json:"completionTime,omitempty"`
}

// UpdateHistory states (HyperShift's).
const (
	UpdateStatePartial   = "Partial"
	UpdateStateCompleted = "Completed"
)

// Endpoint is a host and port.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// HostedCluster condition types (HyperShift's names).
const (
	ConditionAvailable                 = "Available"
	ConditionProgressing               = "Progressing"
	ConditionDegraded                  = "Degraded"
	ConditionValidConfiguration        = "ValidConfiguration"
	ConditionEtcdAvailable             = "EtcdAvailable"
	ConditionKubeAPIServerAvailable    = "KubeAPIServerAvailable"
	ConditionInfrastructureReady       = "InfrastructureReady"
	ConditionIgnitionEndpointAvailable = "IgnitionEndpointAvailable"
	ConditionPKIReady                  = "PKIReady"
	ConditionDeleting                  = "Deleting"
)

// ClusterList is the answer of GET /v1/clusters.
type ClusterList struct {
	Items []Cluster `json:"items"`
}

// Platforms are the platform types: local (simulated machines of the local cloud), docker
// (real machines: containers of the node image on the local Docker engine) and none
// (machines the user provisions with the pool's userdata).
var Platforms = []string{PlatformLocal, PlatformDocker, PlatformNone}

// RealNodes says whether platform's machines run a real kubelet and containers (docker,
// none), and so get the guest data plane (pod network, DNS).
func RealNodes(platform string) bool { return platform == PlatformDocker || platform == PlatformNone }

// ProvidesMachines says whether Hostplane provisions platform's machines itself, through
// Cluster API (local, docker); on none the user does.
func ProvidesMachines(platform string) bool {
	return platform == PlatformLocal || platform == PlatformDocker
}

// platformList is Platforms for error messages: "local", "docker" or "none".
func platformList() string {
	q := make([]string, len(Platforms))
	for i, p := range Platforms {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
