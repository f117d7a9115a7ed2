// Package pkid is hostplane's pkid daemon: the certificates, keys and kubeconfigs of every
// hosted control plane, and their rotation.
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/pkid runs.
//
// # What it does
//
// The reconciler is keyed by cluster name and fed by cluster, infra and component events
// (docs/control-plane-flow.md). Once the cluster exists, is not being deleted and its
// api.Infra is Ready, pkid issues an api.ClusterPKI into the "pki" bucket: a root CA, an
// etcd CA, a front-proxy CA, a kubelet signer CA, a service-account key pair, the leaf
// certificates of every component (api.Cert* names) and the admin, controller-manager and
// scheduler kubeconfigs pointing at https://<infra endpoint>. Private keys (CA keys included)
// and kubeconfigs are sealed with certs.SealKey (Config.SealKeyFile, default
// <data dir>/pki.key). With them comes the guest's Secret encryption key
// (ClusterPKI.SecretEncryption): 32 random bytes for kube-apiserver's aescbc provider, sealed
// the same way, generated once for every cluster whose spec.secretEncryption is aescbc (the
// default, also when the field is absent) and kept across certificate renewals; a record
// without one gets one (a new Serial). The first issuance publishes pki.ready.
//
// POST /v1/clusters/{cluster}/pki/rotate also starts a rotation of that key
// (encryption.go, stepKeyRotation): a new key listed second, then first, then every guest
// Secret rewritten through the guest API, then the old key dropped; each step waits until
// componentd reports kube-apiserver running the previous step's PKI serial
// (ControlPlaneComponentStatus.PKISerial). The etcd and kube-apiserver
// serving certificates also name the hosts of componentd's kubernetes runtime
// ("*.etcd-discovery.hostplane-<cluster>.svc", "kube-apiserver.hostplane-<cluster>.svc"; see
// api.EtcdDiscoveryHost and api.KubeAPIServerHost), so one PKI serves both runtimes.
//
// # Rotation
//
// Every leaf is renewed once Config.RenewFraction (default 2/3) of its lifetime has passed;
// the reconcile asks to run again at NextRotation. A renewal also re-renders the kubeconfigs
// that embed a renewed client certificate. A leaf is reissued early when its SANs no longer
// cover the infra (endpoint, apiserver or etcd hosts, service CIDR), when its subject or
// issuer no longer match, when the cluster's leaf lifetime was shortened below what the leaf
// still has, or when POST /v1/clusters/{cluster}/pki/rotate asked for it. Every change gets a
// new Serial and publishes pki.rotated, so componentd rolls the components that use it.
//
// Lifetimes come from the cluster's spec.pki (caLifetime, leafLifetime; Go durations). A
// value that does not parse or is not positive falls back to the default (10 years for CAs,
// 1 year for leaves) and is logged; it never blocks issuance.
//
// CAs are NOT rotated: they live as long as caLifetime says (10 years by default). A leaf is
// never valid past its CA (certs caps it), and a leaf capped at its CA's expiry is not
// renewed, since renewal could not extend it. CA rotation (trust bundles with old and new
// CA, staged rollout) is future work.
//
// # Events
//
// Events go through the daemon's outbox (pkg/outbox): pki.ready (first issuance) and
// pki.rotated (any later Serial), with the new serial as data, and pki.deleted are recorded
// before the write they are about, so a crash between the write and the publish loses none.
//
// # Deletion
//
// A cluster that is missing, or has a deletionTimestamp, is being deleted: pkid waits until
// no "<cluster>.>" key is left in the "controlplane" bucket (Message on the record says so
// meanwhile), then deletes its key and publishes pki.deleted.
//
// # Kubelet CSR approval
//
// With a management cluster (daemon.Base.ManagementKubeconfig), pkid approves the kubelet
// client CSRs of every guest cluster whose PKI is Ready, once its kube-apiserver has been
// Available (approver.go): one CSR informer per cluster on the guest's admin client
// (pkg/guest), stopped when the cluster is deleted or hibernates (started again once the woken
// kube-apiserver is Available) and restarted when the PKI serial changes
// (hostplane_pkid_csr_approvers counts them). A CSR is approved (condition Approved, reason
// ApprovalReason, a message naming the Machine) only when its signer is
// kubernetes.io/kube-apiserver-client-kubelet, its x509 request has CN system:node:<m>, O
// exactly [system:nodes], no SANs and client usages only, its requester is a bootstrap token
// (system:bootstrap:<id>) of exactly one node pool group (api.BootstrapGroupPrefix+<np>) or
// system:node:<m> itself (renewal), and the management cluster has a Cluster API Machine <m>
// (cluster.x-k8s.io/v1beta2) in api.ControlPlaneNamespace(cluster), labelled
// cluster.x-k8s.io/cluster-name=<cluster> and, for a bootstrap token,
// hostplane.dev/nodepool=<np>, not being deleted; a bootstrap token's request for a node the
// guest already has a Node of stays pending (OutcomeNodeExists: that kubelet holds a
// certificate, and a second one would let any holder of the pool's token act as it). A
// platform-none pool's nodes have no Machine: there the pool itself, not being deleted,
// stands for it. kube-controller-manager then signs it with
// kubelet-signer. Anything else stays pending, never denied; each decision is logged and
// counted once per CSR and outcome (hostplane_pkid_csr_decisions_total{outcome}). A CSR
// waiting for its Machine is retried with backoff for five minutes after its creation, then at
// every informer resync (a minute). Without a management cluster no CSR is approved, and pkid
// says so once at start.
//
// # Replicas
//
// Several replicas share the durable consumer; writes are compare-and-swap on the key's
// revision, so a replica that loses a race re-reads and reconciles again. Two replicas may
// both issue for a new cluster, but only the first Create wins.
package pkid
