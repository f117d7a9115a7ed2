package component

import (
	"bytes"
	"fmt"
	"path"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
	"github.com/hostplane/hostplane/services/componentd/internal/encryption"
)

// Directories inside a cluster's directory.
const (
	PKIDir        = "pki"
	KubeconfigDir = "kubeconfigs"
	LogDir        = "logs"
	// AuditDir holds kube-apiserver's audit logs (AuditLogFile) and their rotated backups.
	AuditDir = "audit"
)

// Paths, relative to a cluster's directory, of the files the components read.
const (
	FileSAPublic  = PKIDir + "/sa.pub"
	FileSAPrivate = PKIDir + "/sa.key"
	// FileClientCA is kube-apiserver's --client-ca-file: root-ca, which signs every
	// control-plane client certificate, then kubelet-signer, which signs the kubelets'
	// client certificates (kube-controller-manager's --cluster-signing-*).
	FileClientCA = PKIDir + "/client-ca.crt"
	// FileAuditPolicy is kube-apiserver's --audit-policy-file (AuditPolicyFile).
	FileAuditPolicy = "audit-policy.yaml"
	// FileEncryptionConfig is kube-apiserver's --encryption-provider-config: the
	// EncryptionConfiguration with the cluster's Secret encryption keys (package encryption).
	// It is written only when the PKI holds keys.
	FileEncryptionConfig = PKIDir + "/encryption-config.yaml"
)

// CertFile and KeyFile are where the certificate and key called name (one of the api.Cert*
// names) are written, relative to the cluster's directory.
func CertFile(name string) string { return path.Join(PKIDir, name+".crt") }

// KeyFile: see CertFile.
func KeyFile(name string) string { return path.Join(PKIDir, name+".key") }

// KubeconfigFile is where the kubeconfig called name (api.Kubeconfig*) is written.
func KubeconfigFile(name string) string { return path.Join(KubeconfigDir, name+".kubeconfig") }

// LogFile is where replica n of component logs, relative to the cluster's directory.
func LogFile(component string, n int) string {
	return path.Join(LogDir, fmt.Sprintf("%s-%d.log", component, n))
}

// AuditLogFile is where replica n of kube-apiserver writes its audit log, relative to the
// cluster's directory.
func AuditLogFile(n int) string { return path.Join(AuditDir, audit.LogFile(n)) }

// AuditPolicyFile is the content of FileAuditPolicy for the cluster's audit configuration.
func AuditPolicyFile(a api.Audit) ([]byte, error) { return audit.PolicyFile(a.WithDefaults().Profile) }

// written lists the certificates whose files componentd writes, and whether their private
// key is needed too. CA keys stay in the PKI record, except the kubelet signer's, which
// kube-controller-manager signs with.
var written = []struct {
	name string
	key  bool
}{
	{api.CertRootCA, false},
	{api.CertEtcdCA, false},
	{api.CertFrontProxyCA, false},
	{api.CertKubeletSigner, true},
	{api.CertEtcdServer, true},
	{api.CertEtcdPeer, true},
	{api.CertAPIServerEtcdClient, true},
	{api.CertAPIServer, true},
	{api.CertAPIServerKubelet, true},
	{api.CertFrontProxyClient, true},
}

var writtenKubeconfigs = []string{api.KubeconfigControllerMgr, api.KubeconfigScheduler}

// optionalKubeconfigs are written when the PKI holds them: a PKI issued before the
// autoscaler existed has no karpenter kubeconfig until pkid adds it.
var optionalKubeconfigs = []string{api.KubeconfigKarpenter}

// Opener opens what pkid sealed (certs.SealKey).
type Opener interface {
	Open(sealed []byte) ([]byte, error)
}

// Files returns the content of every file the components of a cluster read, keyed by path
// relative to the cluster's directory. Sealed keys and kubeconfigs are opened with o.
func Files(p *api.ClusterPKI, o Opener) (map[string][]byte, error) {
	files := make(map[string][]byte, 2*len(written)+4)
	for _, w := range written {
		b, ok := p.Certs[w.name]
		if !ok || len(b.CertPEM) == 0 {
			return nil, fmt.Errorf("%w: no certificate %q", ErrIncompletePKI, w.name)
		}
		files[CertFile(w.name)] = b.CertPEM
		if !w.key {
			continue
		}
		if len(b.SealedKey) == 0 {
			return nil, fmt.Errorf("%w: no key for certificate %q", ErrIncompletePKI, w.name)
		}
		key, err := o.Open(b.SealedKey)
		if err != nil {
			return nil, fmt.Errorf("open key of %q: %w", w.name, err)
		}
		files[KeyFile(w.name)] = key
	}
	bundle, err := ClientCABundle(p)
	if err != nil {
		return nil, err
	}
	files[FileClientCA] = bundle
	if len(p.ServiceAccount.PublicPEM) == 0 || len(p.ServiceAccount.SealedPriv) == 0 {
		return nil, fmt.Errorf("%w: no service-account key pair", ErrIncompletePKI)
	}
	files[FileSAPublic] = p.ServiceAccount.PublicPEM
	sa, err := o.Open(p.ServiceAccount.SealedPriv)
	if err != nil {
		return nil, fmt.Errorf("open service-account key: %w", err)
	}
	files[FileSAPrivate] = sa
	for _, name := range writtenKubeconfigs {
		sealed, ok := p.Kubeconfigs[name]
		if !ok || len(sealed) == 0 {
			return nil, fmt.Errorf("%w: no kubeconfig %q", ErrIncompletePKI, name)
		}
		kc, err := o.Open(sealed)
		if err != nil {
			return nil, fmt.Errorf("open kubeconfig %q: %w", name, err)
		}
		files[KubeconfigFile(name)] = kc
	}
	for _, name := range optionalKubeconfigs {
		sealed, ok := p.Kubeconfigs[name]
		if !ok || len(sealed) == 0 {
			continue
		}
		kc, err := o.Open(sealed)
		if err != nil {
			return nil, fmt.Errorf("open kubeconfig %q: %w", name, err)
		}
		files[KubeconfigFile(name)] = kc
	}
	enc, err := encryption.Config(p.SecretEncryption, o)
	if err != nil {
		return nil, err
	}
	if enc != nil {
		files[FileEncryptionConfig] = enc
	}
	return files, nil
}

// ClientCABundle is the CA bundle kube-apiserver verifies client certificates against
// (--client-ca-file): root-ca's certificate followed by kubelet-signer's, both PEM.
func ClientCABundle(p *api.ClusterPKI) ([]byte, error) {
	var out []byte
	for _, name := range []string{api.CertRootCA, api.CertKubeletSigner} {
		b, ok := p.Certs[name]
		if !ok || len(b.CertPEM) == 0 {
			return nil, fmt.Errorf("%w: no certificate %q", ErrIncompletePKI, name)
		}
		out = append(out, b.CertPEM...)
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	return out, nil
}

// AdminCredentials opens the admin client certificate and key, which kube-apiserver's
// readiness probe presents. They are never written to disk by componentd.
func AdminCredentials(p *api.ClusterPKI, o Opener) (certPEM, keyPEM []byte, err error) {
	b, ok := p.Certs[api.CertAdmin]
	if !ok || len(b.CertPEM) == 0 || len(b.SealedKey) == 0 {
		return nil, nil, fmt.Errorf("%w: no admin certificate", ErrIncompletePKI)
	}
	key, err := o.Open(b.SealedKey)
	if err != nil {
		return nil, nil, fmt.Errorf("open admin key: %w", err)
	}
	return b.CertPEM, key, nil
}
