// Package mgmtcluster runs a real management Kubernetes cluster on this host for tests: the
// management etcd, kube-apiserver and kube-controller-manager (through localkube), a
// kube-scheduler, and two or more nodes, each a network namespace of its own with a private
// containerd (own root, state and socket) and a kubelet of the management release. Pods get
// their own addresses from the CNI bridge and host-local plugins (Debian's
// containernetworking-plugins), so scheduling, spreading and the loss of a node are real.
//
// The network is the test's own: a switch namespace holds a bridge; the host reaches it over one
// veth pair (the host side carries the apiserver's address), every node over another. Nodes
// have no default route, so pods reach only the nodes, the host and each other.
//
//	host  <Name>0 10.231.0.1/24 ──veth── [<Name>-sw: bridge br0] ──veth── eth0 10.231.0.11 [<Name>-n1]
//	                                                                └─veth── eth0 10.231.0.12 [<Name>-n2]
//	pods of node i: 10.232.i.0/24 on the bridge cni0 inside <Name>-n<i>; the host and the other
//	nodes route that range via node i's address.
//
// Pods resolve Services through the cluster's own DNS server on the host's link address
// (names of Services and of a headless Service's pods only; nothing is forwarded), and
// AddHostPathVolumes gives StatefulSets' claims something to bind to.
//
// Images are written by this package as docker archives around static binaries (no registry,
// no pulls; pods use imagePullPolicy: Never) and imported into every node's containerd. The
// sandbox ("pause") image is built from a tiny Go program here.
//
// Everything the cluster changes on the host is recorded before it is changed (in
// <Dir>/host-state.json) and undone by Stop: processes (kubelets, containerds and their shims,
// every container), mounts under Dir and the pods' network namespaces, the node and switch
// namespaces with their links and routes, cgroups, sysctls the kubelet sets, iptables chains,
// /var/log/containers, /var/lib/cni, /run/containerd/s. Start first undoes whatever a crashed
// earlier run with the same Dir left behind. Root is required.
package mgmtcluster
