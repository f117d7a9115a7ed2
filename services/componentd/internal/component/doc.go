// Package component declares the four control-plane components hostplane runs per hosted
// cluster with the process runtime — etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler — and derives everything about them from one Inputs value: dependencies,
// replica counts, the config hash, each replica's process.Spec and its readiness probe.
//
// Everything here is a pure function of Inputs: the same cluster, infra allocation, PKI and
// directory give byte-identical process specs, which is what lets a restarted componentd
// re-adopt the processes a previous one started.
//
// Observation is what a runtime (procruntime, or componentd's kubernetes adapter) reports of
// one component for componentd to record.
package component
