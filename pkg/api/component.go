package api

// ControlPlaneComponent is one control-plane workload of a cluster (bucket "controlplane",
// key "<cluster>.<component>"). componentd is its only writer.
type ControlPlaneComponent struct {
	ObjectMeta
	Cluster string                      `json:"cluster"`
	Spec    ControlPlaneComponentSpec   `json:"spec"`
	Status  ControlPlaneComponentStatus `json:"status"`
}

// Component names.
const (
	ComponentEtcd              = "etcd"
	ComponentKubeAPIServer     = "kube-apiserver"
	ComponentControllerManager = "kube-controller-manager"
	ComponentScheduler         = "kube-scheduler"
	// ComponentKarpenter is the autoscaler: Karpenter's core with Hostplane's cloud provider
	// (cmd/hostplane-karpenter). It runs one replica while the cluster has an autoscaled
	// NodePool and none otherwise.
	ComponentKarpenter = "karpenter"
)

// ControlPlaneComponentSpec is what componentd wants running.
type ControlPlaneComponentSpec struct {
	Version    string   `json:"version"`
	Replicas   int      `json:"replicas"`
	DependsOn  []string `json:"dependsOn,omitempty"`
	ConfigHash string   `json:"configHash"`
}

// ControlPlaneComponentStatus is what runs.
type ControlPlaneComponentStatus struct {
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
	Conditions         Conditions      `json:"conditions,omitempty"`
	Version            string          `json:"version,omitempty"`
	ReadyReplicas      int             `json:"readyReplicas"`
	Replicas           []ReplicaStatus `json:"replicas,omitempty"`
	// PKISerial is the serial of the PKI record (ClusterPKI.Serial) the configuration every
	// replica runs was computed from; it is set when a rollout completes.
	PKISerial string `json:"pkiSerial,omitempty"`
}

// ReplicaStatus is one running replica.
type ReplicaStatus struct {
	Name       string `json:"name"`
	Pid        int    `json:"pid,omitempty"`
	Version    string `json:"version"`
	ConfigHash string `json:"configHash"`
	Ready      bool   `json:"ready"`
	Restarts   int    `json:"restarts"`
	// Draining is set by componentd shortly before it stops this replica (to replace it):
	// infrad's load balancer sends it no new connections from then on.
	Draining bool `json:"draining,omitempty"`
}

// Component condition types.
const (
	ConditionRolloutComplete = "RolloutComplete"
)

// ComponentList is the answer of GET /v1/clusters/{c}/components.
type ComponentList struct {
	Items []ControlPlaneComponent `json:"items"`
}
