package api

// Names of a cluster's control plane inside the management cluster under componentd's
// kubernetes runtime. pkid puts the hosts in the serving certificates whatever the runtime,
// so one PKI serves both.
const (
	// ControlPlaneNamespacePrefix + cluster is the cluster's control-plane namespace.
	ControlPlaneNamespacePrefix = "hostplane-"
	// EtcdDiscoveryService is the headless Service that gives each etcd member a DNS name.
	EtcdDiscoveryService = "etcd-discovery"
	// KubeAPIServerService is the Service in front of the kube-apiserver replicas.
	KubeAPIServerService = "kube-apiserver"
	// KubeAPIServerServicePort is the kube-apiserver Service's port (and its pods').
	KubeAPIServerServicePort = 6443
)

// ControlPlaneNamespace is cluster's control-plane namespace, "hostplane-<cluster>".
func ControlPlaneNamespace(cluster string) string { return ControlPlaneNamespacePrefix + cluster }

// EtcdDiscoveryHost is the DNS name of cluster's etcd discovery Service,
// "etcd-discovery.hostplane-<cluster>.svc"; member i is "etcd-<i>." in front of it.
func EtcdDiscoveryHost(cluster string) string {
	return EtcdDiscoveryService + "." + ControlPlaneNamespace(cluster) + ".svc"
}

// KubeAPIServerHost is the DNS name of cluster's kube-apiserver Service,
// "kube-apiserver.hostplane-<cluster>.svc".
func KubeAPIServerHost(cluster string) string {
	return KubeAPIServerService + "." + ControlPlaneNamespace(cluster) + ".svc"
}

// Names shared by the daemons that meet in the management cluster's Cluster API objects
// (docs/nodepool-flow.md). Every object of a cluster lives in ControlPlaneNamespace(cluster).
const (
	// LabelCluster and LabelNodePool mark every object hostplane writes for a cluster or a
	// NodePool (beside Cluster API's own cluster.x-k8s.io/cluster-name); LabelOwner names the
	// daemon that wrote it.
	LabelCluster  = "hostplane.dev/cluster"
	LabelNodePool = "hostplane.dev/nodepool"
	LabelOwner    = "hostplane.dev/owner"
	// LabelMachineInstanceType on a pool's Cluster API Machines (and their template) names the
	// local instance type they were created with.
	LabelMachineInstanceType = "hostplane.dev/instance-type"

	// AnnotationDesiredConfig on a Cluster API Machine of an InPlace pool names the config
	// hash nodepoold wants the machine to apply; AnnotationDesiredUserData names the userdata
	// Secret carrying the Ignition stub for it. The machine re-fetches Ignition with that
	// stub, applies it and reports AnnotationCurrentConfig on its Node.
	AnnotationDesiredConfig   = "hostplane.dev/desired-config"
	AnnotationDesiredUserData = "hostplane.dev/desired-userdata"
	AnnotationCurrentConfig   = "hostplane.dev/current-config"
	// LabelCurrentConfig is how a real node reports the config it booted: its kubelet can
	// set only labels when it registers, and a label value holds at most 63 characters, so
	// the value is ConfigLabelValue(hash). AnnotationCurrentConfig, when set, wins.
	LabelCurrentConfig = "hostplane.dev/config"

	// InfrastructureGroup is the API group of the local platform's Cluster API
	// infrastructure provider (infrad): LocalCluster, LocalMachine, LocalMachineTemplate.
	InfrastructureGroup   = "infrastructure.hostplane.dev"
	InfrastructureVersion = "v1alpha1"
	// The kinds of that group: infrad writes LocalClusters and LocalMachines (its CRDs),
	// nodepoold a LocalMachineTemplate per pool, clusterd the Cluster's infrastructureRef.
	KindLocalCluster         = "LocalCluster"
	KindLocalMachine         = "LocalMachine"
	KindLocalMachineTemplate = "LocalMachineTemplate"
	// ControlPlaneGroup is the API group of HostedControlPlane (clusterd), the Cluster's
	// controlPlaneRef, which reports the externally managed control plane to Cluster API.
	ControlPlaneGroup   = "controlplane.hostplane.dev"
	ControlPlaneVersion = "v1alpha1"

	// BootstrapGroupPrefix + nodepool is the extra group of a pool's guest bootstrap token
	// (beside system:bootstrappers); pkid approves a kubelet CSR only from the group of the
	// pool the Machine named by the CSR belongs to.
	BootstrapGroupPrefix = "system:bootstrappers:hostplane:"
)

// ProviderID is the spec.providerID of a local-platform machine: "local://<cluster>/<machine>".
func ProviderID(cluster, machine string) string { return "local://" + cluster + "/" + machine }

// KubeconfigSecretName is the Secret Cluster API reads a cluster's admin kubeconfig from
// (key "value"): "<cluster>-kubeconfig".
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// UserDataSecretName is the bootstrap data Secret (key "value", format "ignition") of a
// NodePool's config hash: "<nodepool>-userdata-<first 8 of hash>".
func UserDataSecretName(nodepool, configHash string) string {
	if len(configHash) > 8 {
		configHash = configHash[:8]
	}
	return nodepool + "-userdata-" + configHash
}

// ConfigLabelValue is LabelCurrentConfig's value for a config hash: its first 32 hex digits
// (128 bits).
func ConfigLabelValue(hash string) string {
	if len(hash) > 32 {
		return hash[:32]
	}
	return hash
}

// RunsConfig reports whether a Node with these labels and annotations says it runs config
// hash: AnnotationCurrentConfig (the simulated machines and the in-place agent) or, without
// it, LabelCurrentConfig (a real kubelet's registration).
func RunsConfig(labels, annotations map[string]string, hash string) bool {
	if h, ok := annotations[AnnotationCurrentConfig]; ok && h != "" {
		return h == hash
	}
	v := labels[LabelCurrentConfig]
	return v != "" && v == ConfigLabelValue(hash)
}
