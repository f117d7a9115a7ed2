package api

import "time"

// Infra is what infrad allocated for one cluster (bucket "infra", key = cluster name).
type Infra struct {
	ObjectMeta
	// ClusterGeneration is the cluster generation this allocation was made for.
	ClusterGeneration int64  `json:"clusterGeneration"`
	Platform          string `json:"platform"`
	// Endpoint is where clients reach the kube-apiserver: infrad's TCP load balancer in front
	// of the replicas (a SingleReplica record from before that: the apiserver itself).
	Endpoint Endpoint `json:"endpoint"`
	// InternalEndpoint is the daemons' way to a HighlyAvailable cluster's apiservers: a
	// second listener of infrad's load balancer, over the same replicas, that never wakes
	// the cluster and never counts as activity (docs/hibernation.md). Nil for a
	// SingleReplica cluster (the daemons go to its one apiserver's port) and for an HA
	// record infrad has not yet given one (written before it existed: the next reconcile
	// allocates it).
	InternalEndpoint *Endpoint `json:"internalEndpoint,omitempty"`
	// APIServers are the per-replica kube-apiserver listen endpoints.
	APIServers []Endpoint `json:"apiServers"`
	// Etcd are the members' client and peer ports, one per member.
	Etcd []EtcdMember `json:"etcd"`
	// Ports for kube-controller-manager and kube-scheduler secure serving, one per replica.
	ControllerManagerPorts []int `json:"controllerManagerPorts"`
	SchedulerPorts         []int `json:"schedulerPorts"`
	// AutoscalerPorts are the autoscaler's (component karpenter) metrics and health-probe
	// ports, in that order.
	AutoscalerPorts []int `json:"autoscalerPorts,omitempty"`
	// Ignition is where ignitiond serves the cluster's HTTPS Ignition endpoint
	// (status.ignitionEndpoint), with pkid's "ignition-server" certificate.
	Ignition Endpoint `json:"ignition"`
	Ready    bool     `json:"ready"`
	Message  string   `json:"message,omitempty"`
	// Hibernated is set once infrad stopped every machine of a hibernating cluster (there is
	// nothing to stop on platform none or without a local cloud).
	Hibernated bool `json:"hibernated,omitempty"`
	// LastActivity is when the endpoint's load balancer last accepted a client connection
	// (written at most every ActivityInterval): what spec.hibernation.idleAfter measures.
	LastActivity *time.Time `json:"lastActivity,omitempty"`
	// WakeRequested is when a connection reached the endpoint of the hibernated cluster:
	// clusterd wakes the cluster when it is later than status.hibernation.changedTime.
	WakeRequested *time.Time `json:"wakeRequested,omitempty"`
}

// EtcdMember is one etcd member's addresses.
type EtcdMember struct {
	Name       string `json:"name"`
	Host       string `json:"host"`
	ClientPort int    `json:"clientPort"`
	PeerPort   int    `json:"peerPort"`
}
