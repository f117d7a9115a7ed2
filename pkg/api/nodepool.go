package api

import "time"

// NodePool is a homogeneous group of worker machines of one cluster, with one release, config
// and upgrade type (bucket "nodepools", key "<cluster>.<nodepool>"). nodepoold is its only
// writer. Field names follow HyperShift's NodePool.
type NodePool struct {
	ObjectMeta
	Cluster string         `json:"cluster"`
	Spec    NodePoolSpec   `json:"spec"`
	Status  NodePoolStatus `json:"status"`
}

// Upgrade types (spec.management.upgradeType; immutable after create).
const (
	UpgradeTypeReplace = "Replace"
	UpgradeTypeInPlace = "InPlace"

	ReplaceStrategyRollingUpdate = "RollingUpdate"
	ReplaceStrategyOnDelete      = "OnDelete"
)

// NodePoolSpec is what the user asks for. Replicas and AutoScaling are mutually exclusive.
type NodePoolSpec struct {
	// Replicas is the fixed size of the pool (default 0 when AutoScaling is not set either).
	Replicas *int32 `json:"replicas,omitempty"`
	// AutoScaling lets the Cluster API autoscaler size the pool between Min and Max.
	AutoScaling *NodePoolAutoScaling `json:"autoScaling,omitempty"`
	// Release is the kubelet version of the machines: not newer than the control plane and
	// within the kubelet version skew (at most 3 minors older).
	Release Release `json:"release"`
	// Platform defaults to the cluster's; on platform local, Local.InstanceType defaults to
	// DefaultInstanceType.
	Platform   NodePoolPlatform   `json:"platform,omitempty"`
	Management NodePoolManagement `json:"management"`
	// NodeLabels and Taints reach every node of the pool, existing ones included, without a
	// rollout.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	Taints     []Taint           `json:"taints,omitempty"`
	// Config documents are merged into each machine's Ignition config; changing them rolls
	// the machines.
	Config []ConfigDocument `json:"config,omitempty"`
	// NodeDrainTimeout bounds how long a machine going away is drained ("5m"; default: no
	// bound). NodeVolumeDetachTimeout bounds the wait for its volumes to detach.
	NodeDrainTimeout        string `json:"nodeDrainTimeout,omitempty"`
	NodeVolumeDetachTimeout string `json:"nodeVolumeDetachTimeout,omitempty"`
}

// NodePoolPlatform is where a pool's machines run (HyperShift's NodePoolPlatform): the
// cluster's platform type and that platform's machine settings.
type NodePoolPlatform struct {
	Type  string                 `json:"type"`
	Local *LocalNodePoolPlatform `json:"local,omitempty"`
}

// LocalNodePoolPlatform is the machine settings of a pool on platform local or docker:
// both take their shapes from the local catalogue (on docker, a type's CPU and memory are
// the machine container's limits).
type LocalNodePoolPlatform struct {
	// InstanceType names the machines' shape in the local catalogue (LocalInstanceTypes).
	// Changing it rolls a Replace pool onto machines of the new type; an InPlace pool cannot
	// change it (machines are updated in place and keep their shape).
	InstanceType string `json:"instanceType"`
}

// InstanceType is the pool's local instance type, "" off platforms local and docker.
func (p NodePoolPlatform) InstanceType() string {
	if !ProvidesMachines(p.Type) {
		return ""
	}
	if p.Local == nil || p.Local.InstanceType == "" {
		return DefaultInstanceType
	}
	return p.Local.InstanceType
}

// NodePoolAutoScaling bounds an autoscaled pool.
type NodePoolAutoScaling struct {
	Min int32 `json:"min"`
	Max int32 `json:"max"`
}

// NodePoolManagement says how machines are upgraded and repaired.
type NodePoolManagement struct {
	UpgradeType string          `json:"upgradeType"`
	AutoRepair  bool            `json:"autoRepair,omitempty"`
	Replace     *ReplaceUpgrade `json:"replace,omitempty"`
	InPlace     *InPlaceUpgrade `json:"inPlace,omitempty"`
	// AutoRepairPolicy overrides the MachineHealthCheck defaults (HyperShift's).
	AutoRepairPolicy *AutoRepairPolicy `json:"autoRepairPolicy,omitempty"`
}

// ReplaceUpgrade tunes Replace rollouts (Cluster API MachineDeployment strategy).
type ReplaceUpgrade struct {
	Strategy      string         `json:"strategy,omitempty"`
	RollingUpdate *RollingUpdate `json:"rollingUpdate,omitempty"`
}

// RollingUpdate bounds a Replace rollout: machines added above and missing below the desired
// count at any time. Defaults: maxSurge 1, maxUnavailable 0.
type RollingUpdate struct {
	MaxSurge       *int32 `json:"maxSurge,omitempty"`
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// InPlaceUpgrade tunes InPlace rollouts: how many machines update at once (default 1).
type InPlaceUpgrade struct {
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// AutoRepairPolicy overrides the MachineHealthCheck of an autoRepair pool. Durations are Go
// durations ("8m"). Defaults: NodeReady False/Unknown for 8m (16m on platform none),
// maxUnhealthy 2, nodeStartupTimeout 20m.
type AutoRepairPolicy struct {
	NodeNotReadyTimeout string `json:"nodeNotReadyTimeout,omitempty"`
	NodeStartupTimeout  string `json:"nodeStartupTimeout,omitempty"`
	MaxUnhealthy        *int32 `json:"maxUnhealthy,omitempty"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// ConfigDocument is one machine config document: Content is either an Ignition v3 config
// (JSON) or a MachineConfig (YAML or JSON, kind MachineConfig, its spec.config an Ignition
// config). Name identifies it in conditions and errors.
type ConfigDocument struct {
	Name    string `json:"name"`
	Content string `json:"content"`
	// Redacted is set, with Content empty, in what a caller without the "config" grant reads
	// (a viewer token without it): documents may hold credentials. Never stored; a document
	// sent back redacted is refused.
	Redacted bool `json:"redacted,omitempty"`
}

// NodePoolStatus is what runs.
type NodePoolStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of machines; ReadyReplicas of them have a Ready node;
	// UpdatedReplicas run ConfigHash and Version.
	Replicas        int32 `json:"replicas"`
	ReadyReplicas   int32 `json:"readyReplicas"`
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// Version is the release every machine runs, once they all do.
	Version string `json:"version,omitempty"`
	// ConfigHash is the hash of the inputs that roll machines (release, config documents,
	// platform fields): not labels, taints or replicas. A new hash means a new Ignition token
	// and userdata, so machines roll.
	ConfigHash string     `json:"configHash,omitempty"`
	Conditions Conditions `json:"conditions,omitempty"`
	// Autoscaling is the autoscaler's view of an autoscaled pool (nil for a fixed size).
	Autoscaling *NodePoolAutoscalingStatus `json:"autoscaling,omitempty"`
}

// NodePoolAutoscalingStatus is what the autoscaler made of a pool: the size it asked Cluster
// API for and its last change of it.
type NodePoolAutoscalingStatus struct {
	// TargetReplicas is the machine count the pool is scaled to (its MachineDeployment's
	// replicas); status.replicas catches up as machines come and go.
	TargetReplicas int32 `json:"targetReplicas"`
	// LastScale is the autoscaler's last change of the size (nil: none yet).
	LastScale *ScaleEvent `json:"lastScale,omitempty"`
}

// ScaleEvent is one change of an autoscaled pool's size, as the autoscaler records it on the
// pool's MachineDeployment (annotation AnnotationLastScale, JSON).
type ScaleEvent struct {
	Time time.Time `json:"time"`
	From int32     `json:"from"`
	To   int32     `json:"to"`
	// Reason says why: the NodeClaim a scale-up launched a machine for, the NodeClaim whose
	// node a scale-down removed, or a repair back to min plus the live NodeClaims.
	Reason string `json:"reason"`
}

// AnnotationLastScale on an autoscaled pool's MachineDeployment (or MachineSet) is the
// autoscaler's last ScaleEvent, JSON.
const AnnotationLastScale = "hostplane.dev/last-scale"

// AnnotationNodeClaim on a Machine names the Karpenter NodeClaim it was launched for.
const AnnotationNodeClaim = "hostplane.dev/nodeclaim"

// NodePool condition types (besides Ready).
const (
	NodePoolConditionReady                   = "Ready"
	NodePoolConditionValidReleaseImage       = "ValidReleaseImage"
	NodePoolConditionValidMachineConfig      = "ValidMachineConfig"
	NodePoolConditionUpdatingVersion         = "UpdatingVersion"
	NodePoolConditionUpdatingConfig          = "UpdatingConfig"
	NodePoolConditionAutoscalingEnabled      = "AutoscalingEnabled"
	NodePoolConditionAutorepairEnabled       = "AutorepairEnabled"
	NodePoolConditionAllMachinesReady        = "AllMachinesReady"
	NodePoolConditionAllNodesHealthy         = "AllNodesHealthy"
	NodePoolConditionReachedIgnitionEndpoint = "ReachedIgnitionEndpoint"
)

// NodePoolList is the answer of GET /v1/clusters/{c}/nodepools.
type NodePoolList struct {
	Items []NodePool `json:"items"`
}

// NodePoolKey is the nodepools (and ignition) bucket key of a pool: "<cluster>.<nodepool>".
func NodePoolKey(cluster, nodepool string) string { return cluster + "." + nodepool }

// Machine is one worker machine as GET /v1/clusters/{c}/machines reports it (infrad, from the
// Cluster API Machine, its LocalMachine and the local cloud).
type Machine struct {
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	NodePool string `json:"nodePool"`
	Phase    string `json:"phase"` // Cluster API Machine phase: Pending, Provisioning, Provisioned, Running, Deleting, Failed
	// Platform is where it runs: PlatformLocal (simulated: no container runs on it) or
	// PlatformDocker (a real machine, a container of the node image).
	Platform   string `json:"platform,omitempty"`
	NodeName   string `json:"nodeName,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
	Version    string `json:"version,omitempty"`
	// ConfigHash is the config the machine last applied (from its Ignition payload).
	ConfigHash string `json:"configHash,omitempty"`
	// InstanceType and Zone are the machine's shape and zone on platform local.
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	// CapacityType is on-demand or spot on platform local.
	CapacityType string `json:"capacityType,omitempty"`
	// NodeClaim is the Karpenter NodeClaim the machine was launched for, if any.
	NodeClaim string `json:"nodeClaim,omitempty"`
	// Fault is the fault injected on the local platform, if any.
	Fault     string    `json:"fault,omitempty"`
	Message   string    `json:"message,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// MachineList is the answer of GET /v1/clusters/{c}/machines.
type MachineList struct {
	Items []Machine `json:"items"`
}

// Faults POST /v1/clusters/{c}/machines/{m}/fault injects on the local platform.
const (
	FaultStopHeartbeats = "StopHeartbeats" // the kubelet stops renewing its Lease and status
	FaultCrash          = "Crash"          // the machine stops at once, as if powered off
	FaultFailNextBoot   = "FailNextBoot"   // the next boot of the machine fails before it joins
)

// MachineFault is the body of POST /v1/clusters/{c}/machines/{m}/fault.
type MachineFault struct {
	Type string `json:"type"`
}
