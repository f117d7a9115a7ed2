// Package componentd is hostplane's componentd daemon: it runs every hosted cluster's
// control plane — etcd, kube-apiserver, kube-controller-manager and kube-scheduler — and
// reports one api.ControlPlaneComponent per component (bucket "controlplane", key
// "<cluster>.<component>"), publishing component.progressing, .available, .degraded and
// .deleted as they change (docs/control-plane-flow.md).
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/componentd runs.
//
// # Runtimes
//
// Config.Runtime chooses how the components run. The reconciler is the same for both: it
// reads the cluster, waits for its infra and PKI, hands the cluster to the runtime, and
// writes every record and event through one code path (record), so a component looks the
// same in the API whatever runs it.
//
// Each runtime is a package of its own with a thin adapter here that implements the
// reconciler's workloads interface (reconcile.go): processRuntime (process.go) over package
// procruntime, kubeRuntime (kubernetes.go) over package kuberuntime. This package keeps the
// reconciler, the records and events (status.go), the HTTP API, and etcd backups and
// restores (backups.go, snapshot.go, restore.go).
//
// "process" (the default, package procruntime) starts each component as a child process
// from the release's binaries, rolls the control plane out in dependency order (each
// component Available before its dependents start) and rolls replicas one at a time when a
// release or certificate changes. Stopping the daemon leaves the control planes running:
// the next componentd re-adopts them without a restart. StopAll stops them for good. The
// adapter writes the cluster's files, runs the etcd restores before procruntime's Converge
// and the backups after it, and records through procruntime.Recorder.
//
// "kubernetes" applies the control plane into the namespace "hostplane-<cluster>" of the
// management cluster (Config.ManagementKubeconfig) with package kuberuntime: Secrets,
// Services, the etcd StatefulSet and Deployments for the others, all at once — the pods of a
// component wait for its dependencies, not componentd — and the Deployments and the
// StatefulSet roll their pods themselves. Each record's Spec.ConfigHash is the config hash
// of the component's pod template; Available, RolloutComplete and ReadyReplicas come from
// the workload's status, so on a management cluster where no kubelet runs the pods the
// components stay not Available ("0 of 1 replicas ready"). Component logs are the pods'
// logs in the management cluster, not served by componentd. Stopping componentd leaves the
// workloads as they are.
//
// Both runtimes run the autoscaler (component karpenter, hostplane-karpenter) while the
// cluster has an autoscaled NodePool or the autonode pool (autoscaler.go), and record it
// Idle (Available and RolloutComplete, no replica) otherwise. The kubernetes runtime renders
// it as a one-replica Deployment from Config.KarpenterImage with its own ServiceAccount,
// Role and RoleBinding (it reaches the management cluster in-cluster), deletes those
// objects when it is no longer wanted, and applies at once when the autoscaler is switched
// on or off (the node pools are not part of the cluster's revision).
//
// # Secret encryption
//
// When the cluster's PKI holds Secret encryption keys (pkid adds them; spec.secretEncryption),
// kube-apiserver gets --encryption-provider-config: an EncryptionConfiguration rendered by
// internal/encryption (secrets: aescbc with the keys, then identity), written with mode 0600
// into the cluster's directory (process runtime) or into the Secret
// kuberuntime.SecretEncryptionConfig mounted into the kube-apiserver pods (kubernetes
// runtime). Its content is an input of kube-apiserver's config hash only. Every component
// record's Status.PKISerial says which PKI serial its replicas run once a rollout is
// complete; pkid's key rotation waits for it between steps.
//
// # Deletion
//
// A cluster that is deleting (or whose key is gone) has its workloads removed, then its
// controlplane keys deleted with one component.deleted each; infrad and pkid wait for the
// keys to go. The process runtime stops the processes, dependents first, and removes the
// cluster's directory. The kubernetes runtime deletes every object it manages of the
// cluster, then the namespace, and counts the workloads as gone once the namespace is gone
// or — while the namespace is still terminating — once no Deployment or StatefulSet of the
// cluster is left. The second rule is deliberate: emptying and removing a namespace is the
// job of the management cluster's namespace controller (in kube-controller-manager), and a
// management apiserver without one keeps the namespace terminating forever; waiting for it
// would keep the cluster from ever being deleted. The pods follow their workloads through
// the garbage collector, and a cluster created again under the same name waits (Apply
// fails with kuberuntime.ErrNamespaceTerminating, retried) until the old namespace is gone.
package componentd
