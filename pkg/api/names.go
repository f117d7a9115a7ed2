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
