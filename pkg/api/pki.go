package api

import "time"

// ClusterPKI is every certificate, key and kubeconfig of one cluster (bucket "pki", key =
// cluster name). pkid is its only writer. Private keys and kubeconfigs (which embed keys) are
// sealed with AES-GCM (certs.Seal) before they are stored; readers open them with the same key.
type ClusterPKI struct {
	ObjectMeta
	// ClusterGeneration and InfraRevision are what this bundle was issued for.
	ClusterGeneration int64 `json:"clusterGeneration"`
	// Serial changes on every issuance or rotation; components fold it into their config hash.
	Serial string `json:"serial"`
	// Certs by name (see the Cert* constants).
	Certs map[string]CertBundle `json:"certs"`
	// ServiceAccount is the service-account signing key pair.
	ServiceAccount KeyBundle `json:"serviceAccount"`
	// Kubeconfigs by name (admin, controller-manager, scheduler), sealed.
	Kubeconfigs map[string][]byte `json:"kubeconfigs"`
	Ready       bool              `json:"ready"`
	// NextRotation is when the earliest leaf is due for renewal.
	NextRotation time.Time `json:"nextRotation"`
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
	KubeconfigAdmin         = "admin"
	KubeconfigControllerMgr = "controller-manager"
	KubeconfigScheduler     = "scheduler"
)

// PKIStatus is the answer of GET /v1/clusters/{c}/pki: no key material.
type PKIStatus struct {
	Cluster      string     `json:"cluster"`
	Ready        bool       `json:"ready"`
	Serial       string     `json:"serial"`
	NextRotation time.Time  `json:"nextRotation"`
	Certificates []CertInfo `json:"certificates"`
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
