package localcloud

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// kubeletUsages are the key usages the kubelet requests for its client certificate with an
// ECDSA key (pkg/kubelet/certificate/bootstrap: key encipherment is for RSA keys only).
var kubeletUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// join is the kubelet's TLS bootstrap: with the bootstrap token of the bootstrap kubeconfig it
// requests a kubelet client certificate for system:node:<name> and waits until it is approved
// (pkid) and signed (kube-controller-manager).
func (m *machine) join(ctx context.Context, nc *nodeConfig) (*credentials, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(nc.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, PathBootstrapKubeconfig, err)
	}
	if len(cfg.CAData) == 0 && cfg.CAFile == "" {
		cfg.CAData = nc.CA
	}
	cfg.UserAgent = userAgent(nc.Kubelet.KubeletVersion)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("bootstrap client: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the kubelet key: %w", err)
	}
	subject := &pkix.Name{CommonName: "system:node:" + m.name, Organization: []string{"system:nodes"}}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make the kubelet CSR: %w", err)
	}
	name, err := csrName(&key.PublicKey, subject, kubeletUsages)
	if err != nil {
		return nil, err
	}
	reqName, uid, err := csr.RequestCertificateWithContext(ctx, cs, csrPEM, name,
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil, kubeletUsages, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR %s: %w", name, err)
	}
	m.setMessage("waiting for CSR " + reqName + " to be approved and signed")
	m.log.Info("kubelet CSR created", "csr", reqName)
	certPEM, err := csr.WaitForCertificate(ctx, cs, reqName, uid)
	if err != nil {
		return nil, fmt.Errorf("CSR %s: %w", reqName, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encode the kubelet key: %w", err)
	}
	return &credentials{keyPEM: keyPEM, certPEM: certPEM}, nil
}

// csrName is the kubelet's CSR name: "node-csr-" and a digest of the public key, the subject
// and the usages (pkg/kubelet/certificate/bootstrap digestedName).
func csrName(pub any, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	h := sha512.New512_256()
	enc := base64.RawURLEncoding.EncodeToString
	write := func(b []byte) {
		h.Write([]byte(enc(b)))
		h.Write([]byte{'|'})
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode the kubelet public key: %w", err)
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + enc(h.Sum(nil)), nil
}

// nodeClient returns a clientset acting as the machine's node identity, on a transport of its
// own (closed with closeIdle) so a deleted machine leaves no connection behind.
func nodeClient(nc *nodeConfig, creds *credentials) (kubernetes.Interface, *http.Transport, error) {
	boot, err := clientcmd.RESTConfigFromKubeConfig(nc.Bootstrap)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, PathBootstrapKubeconfig, err)
	}
	caPEM := boot.CAData
	if len(caPEM) == 0 {
		caPEM = nc.CA
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("%w: no CA to trust the apiserver with", ErrInvalidConfig)
	}
	pair, err := tls.X509KeyPair(creds.certPEM, creds.keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	tr := utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: boot.TLSClientConfig.ServerName, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	})
	cfg := &rest.Config{
		Host:      boot.Host,
		Transport: tr,
		UserAgent: userAgent(nc.Kubelet.KubeletVersion),
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
		QPS:   20,
		Burst: 40,
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("node client: %w", err)
	}
	return cs, tr, nil
}

func userAgent(version string) string {
	return "kubelet/" + version + " (linux/amd64) hostplane-localcloud"
}
