// Package procruntime is componentd's process runtime: it runs a hosted cluster's control
// plane — etcd, kube-apiserver, kube-controller-manager, kube-scheduler and, while the
// cluster autoscales, hostplane-karpenter — as child processes of componentd, from the
// release's binaries, under one pkg/process Supervisor.
//
// A Runtime is built with New from a Config: componentd's directory (the supervisor's
// pidfiles in <dir>/run, each cluster's certificates, kubeconfigs, etcd data, logs and
// audit log in <dir>/clusters/<cluster>, see ClusterDir), a logger, and two hooks: Enqueue,
// which asks for a cluster's reconcile as soon as a replica the runtime started is ready,
// and Restarted, which counts replica restarts in componentd's metric. Open starts the
// supervisor, which finds the processes an earlier one left running by their pidfiles;
// Close stops watching them and leaves them running, so the next componentd re-adopts them
// without a restart; StopAll stops every process, dependents first, for good. The Runtime
// is a Runnable: Start owns the goroutines that wait for started replicas to be ready.
//
// Converge takes a cluster's component.Inputs (its files written with WriteFiles first) and
// walks the components in dependency order. For each one it re-adopts replicas a previous
// componentd left running with the desired config (waiting a little for their probe),
// starts those that run nothing once its dependencies are Available — a load-balanced
// component running several replicas starts one first (FirstReplicaWait) — and replaces
// one replica that runs an older config at a time once its dependencies finished their own
// rollout (package rollout), a ready load-balanced replica being marked draining for
// DrainDelay first. It stops replicas beyond those wanted, then hands what runs to the
// Recorder as a component.Observation: the Recorder (componentd) turns it into the
// component's record and events, the same code path the kubernetes runtime records through.
// A replica that is not ready and restarted twice makes its component Degraded
// (ReasonCrashLooping).
//
// Hibernate stops a cluster's processes and keeps its directory, so waking is an ordinary
// Converge; Stop stops them for an in-place etcd restore; Remove stops them and removes the
// cluster's directory. All three stop dependents first: the autoscaler,
// kube-controller-manager and kube-scheduler together, then kube-apiserver, then etcd.
//
// Everything but the processes is componentd's: reading the cluster, its infra and PKI, the
// records and events, etcd backups and restores.
package procruntime
