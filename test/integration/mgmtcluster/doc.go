// Package mgmtcluster tests pkg/mgmtcluster: a real management cluster on this host (the
// management apiserver, a scheduler, two kubelet nodes in network namespaces on containerd
// and runc, pods addressed by the CNI bridge plugin), through what a user of the cluster
// notices: nodes Ready, pods spread and served on their own addresses, a lost node's pods
// rescheduled, and nothing left on the host afterwards. It needs root, containerd, runc,
// Debian's containernetworking-plugins and the management release's kubelet (make mgmt-test
// installs and builds them).
package mgmtcluster
