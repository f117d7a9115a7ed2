package api

import "time"

// ClusterPKI is every certificate, key and kubeconfig of one cluster (bucket "pki", key =
// cluster name). pkid is its only writer. Private keys and kubeconfigs (which embed keys) are
// sealed with AES-GCM (certs.SealKey.Seal) before they are stored; readers open them with the
// same key (certs.LoadOrCreateSealKey of HOSTPLANE_PKI_KEY_FILE, default <data dir>/pki.key).
//
// Layout: Certs holds the four CAs (root-ca, etcd-ca, front-proxy-ca, kubelet-signer; IsCA,
// their keys sealed too, since kube-controller-manager signs with kubelet-signer and
// root-ca) and every leaf, each CertPEM a single PEM certificate signed by its CA and each
// SealedKey a sealed PKCS #8 "PRIVATE KEY" PEM. ServiceAccount.SealedPriv is a sealed PKCS #8
// PEM, PublicPEM a PKIX "PUBLIC KEY" PEM. Kubeconfigs are sealed YAML with the client
// certificate and key embedded. CAs are never rotated; leaves are renewed before expiry.
type ClusterPKI struct {
	ObjectMeta
	// ClusterGeneration is the cluster generation this bundle was last reconciled for.
	ClusterGeneration int64 `json:"clusterGeneration"`
	// Serial changes on every issuance or rotation; components fold it into their config hash.
	Serial string `json:"serial"`
	// Certs by name (see the Cert* constants).
	Certs map[string]CertBundle `json:"certs"`
	// ServiceAccount is the service-account signing key pair.
	ServiceAccount KeyBundle `json:"serviceAccount"`
	// SecretEncryption holds the keys the guest's kube-apiserver encrypts Secrets in etcd
	// with (spec.secretEncryption); nil until pkid generated them.
	SecretEncryption *EncryptionKeys `json:"secretEncryption,omitempty"`
	// Kubeconfigs by name (admin, controller-manager, scheduler), sealed.
	Kubeconfigs map[string][]byte `json:"kubeconfigs"`
	// KubeconfigServer is the URL (https://host:port of the infra endpoint) the kubeconfigs
	// point at.
	KubeconfigServer string `json:"kubeconfigServer,omitempty"`
	Ready            bool   `json:"ready"`
	// NextRotation is when the earliest leaf is due for renewal.
	NextRotation time.Time `json:"nextRotation"`
	// RotationRequestedAt is set by POST /v1/clusters/{c}/pki/rotate: pkid renews every leaf
	// and clears it.
	RotationRequestedAt *time.Time `json:"rotationRequestedAt,omitempty"`
	// Message says what pkid waits for, if anything (for example during deletion).
	Message string `json:"message,omitempty"`
}

// CertBundle is one certificate and its sealed private key.
type CertBundle struct {
	CertPEM   []byte    `json:"certPEM"`
	SealedKey []byte    `json:"sealedKey"`
	Subject   string    `json:"subject"`
	Issuer    string    `json:"issuer"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	IsCA      bool      `json:"isCA"`
}

// KeyBundle is a public key and its sealed private key, PEM.
type KeyBundle struct {
	PublicPEM  []byte `json:"publicPEM"`
	SealedPriv []byte `json:"sealedPrivate"`
}

// EncryptionKeys are the keys of one encryption provider, in the order kube-apiserver's
// EncryptionConfiguration lists them: the first encrypts new writes, every key decrypts.
type EncryptionKeys struct {
	// Type is the provider: SecretEncryptionAESCBC.
	Type string          `json:"type"`
	Keys []EncryptionKey `json:"keys"`
	// Rotation is the key rotation in progress, nil when none is.
	Rotation *EncryptionKeyRotation `json:"rotation,omitempty"`
}

// EncryptionKeyRotation is a Secret encryption key rotation, done the way Kubernetes
// documents it: a new key is added second (every kube-apiserver can decrypt with it), made
// first (new writes use it), every Secret is rewritten through the guest API (so it is
// encrypted with it), and the old key is dropped. Each step waits until kube-apiserver runs
// the configuration of the step before.
type EncryptionKeyRotation struct {
	// Phase is the step reached (the Rotation* phases).
	Phase       string    `json:"phase"`
	RequestedAt time.Time `json:"requestedAt"`
	// Key is the name of the new key.
	Key string `json:"key,omitempty"`
	// Rewritten counts the Secrets rewritten with the new key.
	Rewritten int `json:"rewritten,omitempty"`
	// Message says what the rotation waits for.
	Message string `json:"message,omitempty"`
}

// Phases of an EncryptionKeyRotation, in order.
const (
	RotationRequested = "Requested" // POST .../pki/rotate asked for it
	RotationKeyAdded  = "KeyAdded"  // the new key is listed second
	RotationKeyActive = "KeyActive" // the new key is first: new writes use it
	RotationRewritten = "Rewritten" // every Secret was rewritten with the new key
)

// EncryptionKey is one data-encryption key: 32 random bytes, sealed like every private key.
type EncryptionKey struct {
	// Name is the key's name in the EncryptionConfiguration; kube-apiserver stores it in
	// every value it encrypts ("k8s:enc:aescbc:v1:<name>:"), so it is unique and never reused.
	Name      string    `json:"name"`
	Sealed    []byte    `json:"sealedSecret"`
	CreatedAt time.Time `json:"createdAt"`
}

// Certificate names in ClusterPKI.Certs.
const (
	CertRootCA              = "root-ca" // signs the apiserver serving cert and client certs
	CertEtcdCA              = "etcd-ca"
	CertFrontProxyCA        = "front-proxy-ca"
	CertKubeletSigner       = "kubelet-signer" // kcm --cluster-signing-*: signs kubelet client/serving CSRs
	CertEtcdServer          = "etcd-server"
	CertEtcdPeer            = "etcd-peer"
	CertAPIServerEtcdClient = "apiserver-etcd-client"
	CertAPIServer           = "apiserver"
	CertAPIServerKubelet    = "apiserver-kubelet-client"
	CertFrontProxyClient    = "front-proxy-client"
	CertAdmin               = "admin"
	CertControllerManager   = "controller-manager"
	CertScheduler           = "scheduler"
	CertKarpenter           = "karpenter"       // the autoscaler's guest identity
	CertIgnitionServer      = "ignition-server" // ignitiond's HTTPS serving cert for the cluster, signed by root-ca
	KubeconfigAdmin         = "admin"
	KubeconfigControllerMgr = "controller-manager"
	KubeconfigScheduler     = "scheduler"
	KubeconfigKarpenter     = "karpenter"
)

// PKIStatus is the answer of GET /v1/clusters/{c}/pki: no key material.
type PKIStatus struct {
	Cluster      string     `json:"cluster"`
	Ready        bool       `json:"ready"`
	Serial       string     `json:"serial"`
	NextRotation time.Time  `json:"nextRotation"`
	Certificates []CertInfo `json:"certificates"`
	// RotationRequestedAt is set while a requested rotation is pending.
	RotationRequestedAt *time.Time `json:"rotationRequestedAt,omitempty"`
	// Message says what pkid waits for, if anything.
	Message string `json:"message,omitempty"`
	// SecretEncryption names the keys the guest's Secrets are encrypted with (never the keys).
	SecretEncryption *SecretEncryptionStatus `json:"secretEncryption,omitempty"`
}

// SecretEncryptionStatus describes ClusterPKI.SecretEncryption without key material.
type SecretEncryptionStatus struct {
	Type string `json:"type"`
	// Keys in EncryptionConfiguration order: the first (Active) encrypts new writes.
	Keys []EncryptionKeyInfo `json:"keys"`
	// Rotation is the key rotation in progress, nil when none is.
	Rotation *EncryptionKeyRotation `json:"rotation,omitempty"`
}

// EncryptionKeyInfo describes one encryption key.
type EncryptionKeyInfo struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	Active    bool      `json:"active"`
}

// CertInfo describes one certificate.
type CertInfo struct {
	Name      string    `json:"name"`
	Subject   string    `json:"subject"`
	Issuer    string    `json:"issuer"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	IsCA      bool      `json:"isCA"`
}

// ResealStatus is the answer of POST /v1/pki/reseal: pkid read its seal keys again and
// sealed every record of the pki bucket that an older key had sealed with the current one.
type ResealStatus struct {
	// Keys is how many seal keys pkid holds: the current one and those that still open.
	Keys int `json:"keys"`
	// Records is how many records the bucket holds.
	Records int `json:"records"`
	// Resealed records were sealed again by this call; Current ones were already sealed with
	// the current key only. Once Resealed+Current = Records, the older keys may be removed.
	Resealed int `json:"resealed"`
	Current  int `json:"current"`
}

// Kubeconfigs of a requester (POST /v1/clusters/{c}/kubeconfigs): a client certificate of
// its own, short-lived, in a group the guest binds to cluster-admin.
const (
	// KubeconfigUserPrefix starts the guest user name of a requester's kubeconfig: the API
	// token's name follows, so no token can name itself into a system: identity.
	KubeconfigUserPrefix = "hostplane:"
	// GroupClusterAdmins is the group of requesters' kubeconfigs; pkid binds it to the
	// guest's cluster-admin ClusterRole (binding of the same name).
	GroupClusterAdmins = "hostplane:cluster-admins"
	// DefaultKubeconfigTTL, MinKubeconfigTTL and MaxKubeconfigTTL bound KubeconfigRequest.TTL.
	DefaultKubeconfigTTL = time.Hour
	MinKubeconfigTTL     = 5 * time.Minute
	MaxKubeconfigTTL     = 24 * time.Hour
)

// KubeconfigRequest is the body of POST /v1/clusters/{c}/kubeconfigs (optional).
type KubeconfigRequest struct {
	// TTL is the client certificate's lifetime, a Go duration from 5m to 24h (default 1h).
	TTL string `json:"ttl,omitempty"`
}
