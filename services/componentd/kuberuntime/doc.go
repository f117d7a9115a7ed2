// Package kuberuntime is componentd's kubernetes runtime: instead of starting processes it
// applies, into the namespace "hostplane-<cluster>" of the management kube-apiserver, the
// objects that run a hosted cluster's control plane:
//
//   - Secrets with the cluster's PKI (kubernetes.io/tls for every certificate with a key,
//     Opaque for the root CA, the service-account key pair and the kubeconfigs), opened from
//     the sealed api.ClusterPKI pkid keeps, and the Secret "kube-apiserver-audit-policy"
//     with the audit policy of the cluster's profile (kube-apiserver logs to an emptyDir
//     volume "audit" of its pod, which componentd does not read back);
//   - etcd as a StatefulSet (3 members for HighlyAvailable, 1 for SingleReplica) behind the
//     headless Service "etcd-discovery", peer and client traffic over mutual TLS;
//   - kube-apiserver (2 or 1 replicas), kube-controller-manager and kube-scheduler (2 or 1)
//     as Deployments, and the Service "kube-apiserver" in front of the API servers;
//   - for HighlyAvailable, a PodDisruptionBudget per component, and required pod
//     anti-affinity across management nodes (kubernetes.io/hostname) for every replicated
//     component, so losing one node costs at most one etcd member and one replica of each
//     Deployment: such a control plane needs at least 3 schedulable management nodes (one
//     replica only prefers a node of its own; docs/kubernetes-runtime.md says what losing
//     a management node does);
//   - while Inputs.Karpenter.Enabled, the autoscaler: the Deployment "karpenter" (one
//     replica, Recreate) running hostplane-karpenter from Inputs.Karpenter.Image, the Secret
//     "karpenter-kubeconfig" (its guest identity), and the ServiceAccount and
//     RoleBinding "karpenter" it reaches the management cluster with, in-cluster: the
//     binding grants, in the namespace only, the ClusterRole KarpenterClusterRole the
//     deployment ships (KarpenterRules: the Cluster API objects its cloud provider reads and
//     writes). Disabled, none of them is rendered, so Apply deletes them.
//
// Render is a pure function of Inputs: the same inputs give the same objects, byte for byte.
// Each pod template carries the annotation hostplane.dev/config-hash, a digest of the pod
// template and of the Secret data it mounts, so a new release or a renewed certificate rolls
// exactly the components it concerns. Runtime applies the objects with server-side apply
// (field manager "hostplane-componentd"), prunes what it applied before and no longer
// renders, reports each workload's rollout from its status and deletes a cluster's namespace.
//
// Runtime.Hibernate scales every workload of a cluster to 0 replicas (field manager
// "hostplane-componentd-hibernate") and keeps everything else, etcd's claims included; it
// reports when no pod is left. The next Apply, forced, takes spec.replicas back: waking a
// cluster is an Apply. Its caller passes HeldOnWake's components as Inputs.Held, so etcd and
// kube-apiserver start first and kube-controller-manager, kube-scheduler and the autoscaler
// stay at 0 until kube-apiserver is Available (then an Apply without them held starts them).
//
// etcd is not bound to the release, as in the process runtime: Runtime.Apply keeps the
// image of an existing etcd StatefulSet unless Inputs.EtcdImage names another one, so a
// Kubernetes upgrade rolls kube-apiserver, kube-controller-manager and kube-scheduler only.
//
// The serving certificates must name the in-cluster hosts: etcd-server and etcd-peer each
// member's "etcd-<i>.etcd-discovery.hostplane-<cluster>.svc" (see EtcdMemberHosts; a
// wildcard "*.etcd-discovery.hostplane-<cluster>.svc" does too), and the kube-apiserver
// certificate either APIServerHost or "kubernetes.default.svc" (which pkid always includes).
// Render fails with ErrCertificateSANs otherwise, rather than roll out pods that cannot talk.
package kuberuntime
