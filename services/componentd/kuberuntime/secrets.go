package kuberuntime

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/services/componentd/internal/encryption"
)

// Secrets of a control-plane namespace.
const (
	SecretRootCA                      = "root-ca"
	SecretEtcdServer                  = "etcd-server"
	SecretEtcdPeer                    = "etcd-peer"
	SecretEtcdClient                  = "etcd-client" // kube-apiserver's etcd client certificate
	SecretAPIServer                   = "kube-apiserver-serving"
	SecretAPIServerKubeletClient      = "kube-apiserver-kubelet-client"
	SecretFrontProxyClient            = "front-proxy-client"
	SecretKubeletSigner               = "kubelet-signer" // the CA kube-controller-manager signs CSRs with
	SecretServiceAccount              = "service-account-key"
	SecretControllerManagerKubeconfig = "kube-controller-manager-kubeconfig"
	SecretSchedulerKubeconfig         = "kube-scheduler-kubeconfig"
	SecretAdminKubeconfig             = "admin-kubeconfig"
	// SecretKarpenterKubeconfig (karpenter.go) is rendered only while the autoscaler is.
	// SecretEncryptionConfig is kube-apiserver's EncryptionConfiguration with the cluster's
	// Secret encryption keys (--encryption-provider-config); rendered only when the PKI
	// holds keys.
	SecretEncryptionConfig = "kube-apiserver-encryption-config"
)

// Keys inside the Secrets. kubernetes.io/tls Secrets hold corev1.TLSCertKey ("tls.crt"),
// corev1.TLSPrivateKeyKey ("tls.key") and KeyCA, the CA that signed the certificate.
const (
	KeyCA = "ca.crt"
	// KeyClientCA, in the kube-apiserver-serving Secret, is kube-apiserver's
	// --client-ca-file: root-ca then kubelet-signer (which signs the kubelets' client
	// certificates), PEM.
	KeyClientCA          = "client-ca.crt"
	KeyKubeconfig        = "kubeconfig"
	KeyServiceAccountKey = "service-account.key" // PKCS #8 private key
	KeyServiceAccountPub = "service-account.pub" // PKIX public key
	KeyEncryptionConfig  = "encryption-config.yaml"
)

// inClusterAPIServerName is the name the kubeconfigs verify kube-apiserver's certificate
// against when it does not name APIServerHost: pkid always includes it.
const inClusterAPIServerName = "kubernetes.default.svc"

// secret is one rendered Secret: its data feeds the config hash of the pods mounting it.
type secret struct {
	name, component string
	typ             corev1.SecretType
	data            map[string][]byte
}

// pkiReader opens the material of one ClusterPKI.
type pkiReader struct {
	p    *api.ClusterPKI
	seal Opener
}

func (r pkiReader) cert(name string) (*x509.Certificate, []byte, error) {
	b, ok := r.p.Certs[name]
	if !ok || len(b.CertPEM) == 0 {
		return nil, nil, fmt.Errorf("%w: no certificate %q", ErrIncompletePKI, name)
	}
	c, err := certs.ParseCertificate(b.CertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: certificate %q: %w", ErrIncompletePKI, name, err)
	}
	return c, b.CertPEM, nil
}

// keyPair returns name's certificate and opened private key, PEM, checked to belong together.
func (r pkiReader) keyPair(name string) (certPEM, keyPEM []byte, err error) {
	b, ok := r.p.Certs[name]
	if !ok || len(b.CertPEM) == 0 || len(b.SealedKey) == 0 {
		return nil, nil, fmt.Errorf("%w: no certificate and key %q", ErrIncompletePKI, name)
	}
	keyPEM, err = r.seal.Open(b.SealedKey)
	if err != nil {
		return nil, nil, fmt.Errorf("open the key of %q: %w", name, err)
	}
	if _, err := certs.ParseKeyPair(b.CertPEM, keyPEM); err != nil {
		return nil, nil, fmt.Errorf("%w: %q: %w", ErrIncompletePKI, name, err)
	}
	return b.CertPEM, keyPEM, nil
}

// secrets renders every Secret of the namespace, in a fixed order: the root CA, the
// components' certificates, the service-account key, the kubeconfigs, then kube-apiserver's
// audit policy and encryption configuration.
func (in *Inputs) secrets() ([]secret, error) {
	r := pkiReader{p: in.PKI, seal: in.Seal}
	for _, cert := range []string{api.CertEtcdServer, api.CertEtcdPeer} {
		if err := checkSANs(r, cert, EtcdMemberHosts(in.Cluster, in.Policy)...); err != nil {
			return nil, err
		}
	}
	_, rootCA, err := r.cert(api.CertRootCA)
	if err != nil {
		return nil, err
	}
	out := []secret{{name: SecretRootCA, component: ComponentShared, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyCA: rootCA}}}
	for _, part := range []func() ([]secret, error){
		r.tlsSecrets,
		in.serviceAccountSecret,
		func() ([]secret, error) { return in.kubeconfigSecrets(r, rootCA) },
		in.apiServerConfigSecrets,
	} {
		s, err := part()
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// tlsSecrets are the components' certificates and keys with the CA that verifies their
// peers; kube-apiserver's also carries the client CA bundle.
func (r pkiReader) tlsSecrets() ([]secret, error) {
	var out []secret
	for _, s := range []struct{ name, component, cert, ca string }{
		{SecretEtcdServer, api.ComponentEtcd, api.CertEtcdServer, api.CertEtcdCA},
		{SecretEtcdPeer, api.ComponentEtcd, api.CertEtcdPeer, api.CertEtcdCA},
		{SecretEtcdClient, api.ComponentKubeAPIServer, api.CertAPIServerEtcdClient, api.CertEtcdCA},
		{SecretAPIServer, api.ComponentKubeAPIServer, api.CertAPIServer, api.CertRootCA},
		{SecretAPIServerKubeletClient, api.ComponentKubeAPIServer, api.CertAPIServerKubelet, api.CertRootCA},
		{SecretFrontProxyClient, api.ComponentKubeAPIServer, api.CertFrontProxyClient, api.CertFrontProxyCA},
		{SecretKubeletSigner, api.ComponentControllerManager, api.CertKubeletSigner, api.CertKubeletSigner},
	} {
		certPEM, keyPEM, err := r.keyPair(s.cert)
		if err != nil {
			return nil, err
		}
		_, caPEM, err := r.cert(s.ca)
		if err != nil {
			return nil, err
		}
		data := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, KeyCA: caPEM}
		if s.name == SecretAPIServer {
			if data[KeyClientCA], err = clientCABundle(r); err != nil {
				return nil, err
			}
		}
		out = append(out, secret{name: s.name, component: s.component, typ: corev1.SecretTypeTLS, data: data})
	}
	return out, nil
}

// serviceAccountSecret is the service-account key pair kube-apiserver and
// kube-controller-manager share.
func (in *Inputs) serviceAccountSecret() ([]secret, error) {
	sa := in.PKI.ServiceAccount
	if len(sa.PublicPEM) == 0 || len(sa.SealedPriv) == 0 {
		return nil, fmt.Errorf("%w: no service-account key", ErrIncompletePKI)
	}
	saKey, err := in.Seal.Open(sa.SealedPriv)
	if err != nil {
		return nil, fmt.Errorf("open the service-account key: %w", err)
	}
	return []secret{{name: SecretServiceAccount, component: ComponentShared, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyServiceAccountKey: saKey, KeyServiceAccountPub: sa.PublicPEM}}}, nil
}

// kubeconfigSecrets are kube-controller-manager's, kube-scheduler's and (when enabled) the
// autoscaler's in-cluster kubeconfigs, and pkid's admin kubeconfig.
func (in *Inputs) kubeconfigSecrets(r pkiReader, rootCA []byte) ([]secret, error) {
	serverName, err := apiServerName(r, in.Cluster)
	if err != nil {
		return nil, err
	}
	var out []secret
	for _, k := range []struct{ secret, component, cert, user string }{
		{SecretControllerManagerKubeconfig, api.ComponentControllerManager, api.CertControllerManager, "system:kube-controller-manager"},
		{SecretSchedulerKubeconfig, api.ComponentScheduler, api.CertScheduler, "system:kube-scheduler"},
	} {
		certPEM, keyPEM, err := r.keyPair(k.cert)
		if err != nil {
			return nil, err
		}
		kc, err := inClusterKubeconfig(in.Cluster, serverName, rootCA, certPEM, keyPEM, k.user)
		if err != nil {
			return nil, err
		}
		out = append(out, secret{name: k.secret, component: k.component, typ: corev1.SecretTypeOpaque,
			data: map[string][]byte{KeyKubeconfig: kc}})
	}
	if in.Karpenter.Enabled {
		s, err := in.karpenterSecret(r, serverName, rootCA)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sealed := in.PKI.Kubeconfigs[api.KubeconfigAdmin]
	if len(sealed) == 0 {
		return nil, fmt.Errorf("%w: no admin kubeconfig", ErrIncompletePKI)
	}
	admin, err := in.Seal.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open the admin kubeconfig: %w", err)
	}
	return append(out, secret{name: SecretAdminKubeconfig, component: ComponentShared, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyKubeconfig: admin}}), nil
}

// apiServerConfigSecrets are kube-apiserver's audit policy and, when the cluster encrypts
// Secrets, its encryption configuration.
func (in *Inputs) apiServerConfigSecrets() ([]secret, error) {
	policy, err := in.auditPolicySecret()
	if err != nil {
		return nil, err
	}
	enc, err := encryption.Config(in.PKI.SecretEncryption, in.Seal)
	if err != nil || enc == nil {
		return []secret{policy}, err
	}
	return []secret{policy, {name: SecretEncryptionConfig, component: api.ComponentKubeAPIServer, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyEncryptionConfig: enc}}}, nil
}

// clientCABundle is root-ca's certificate followed by kubelet-signer's (KeyClientCA).
func clientCABundle(r pkiReader) ([]byte, error) {
	var out []byte
	for _, name := range []string{api.CertRootCA, api.CertKubeletSigner} {
		_, certPEM, err := r.cert(name)
		if err != nil {
			return nil, err
		}
		out = append(out, certPEM...)
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	return out, nil
}

// checkSANs reports whether certificate name covers every host.
func checkSANs(r pkiReader, name string, hosts ...string) error {
	c, _, err := r.cert(name)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if err := c.VerifyHostname(h); err != nil {
			return fmt.Errorf("%w: %s does not name %q (its DNS names: %v)", ErrCertificateSANs, name, h, c.DNSNames)
		}
	}
	return nil
}

// apiServerName is the TLS server name the in-cluster kubeconfigs verify kube-apiserver
// with: "" when its certificate names APIServerHost, else inClusterAPIServerName.
func apiServerName(r pkiReader, cluster string) (string, error) {
	c, _, err := r.cert(api.CertAPIServer)
	if err != nil {
		return "", err
	}
	if c.VerifyHostname(APIServerHost(cluster)) == nil {
		return "", nil
	}
	if c.VerifyHostname(inClusterAPIServerName) == nil {
		return inClusterAPIServerName, nil
	}
	return "", fmt.Errorf("%w: %s names neither %q nor %q", ErrCertificateSANs, api.CertAPIServer,
		APIServerHost(cluster), inClusterAPIServerName)
}

// inClusterKubeconfig is a kubeconfig for user that reaches kube-apiserver through its
// Service in the control-plane namespace.
func inClusterKubeconfig(cluster, serverName string, caPEM, certPEM, keyPEM []byte, user string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = "https://" + net.JoinHostPort(APIServerHost(cluster), strconv.Itoa(APIServerPort))
	c.CertificateAuthorityData = caPEM
	c.TLSServerName = serverName
	cfg.Clusters[cluster] = c
	u := clientcmdapi.NewAuthInfo()
	u.ClientCertificateData = certPEM
	u.ClientKeyData = keyPEM
	cfg.AuthInfos[user] = u
	kctx := clientcmdapi.NewContext()
	kctx.Cluster = cluster
	kctx.AuthInfo = user
	cfg.Contexts[user+"@"+cluster] = kctx
	cfg.CurrentContext = user + "@" + cluster
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("serialise the %s kubeconfig: %w", user, err)
	}
	return out, nil
}
