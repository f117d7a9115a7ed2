package kuberuntime

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/kube"
)

// testPKI is a ClusterPKI laid out the way pkid lays it out, sealed with seal, plus the CA
// key pairs so a test can renew a leaf.
type testPKI struct {
	pki  *api.ClusterPKI
	seal *certs.SealKey
	cas  map[string]*certs.KeyPair
	reqs map[string]leafReq
}

type leafReq struct {
	ca  string
	req certs.Request
}

func newSealKey(t testing.TB) *certs.SealKey {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	s, err := certs.NewSealKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTestPKI issues a complete PKI for cluster whose etcd certificates name etcdHosts
// (besides localhost and 127.0.0.1).
func newTestPKI(t testing.TB, cluster string, etcdHosts ...string) *testPKI {
	t.Helper()
	tp := &testPKI{
		pki: &api.ClusterPKI{
			ObjectMeta:       api.ObjectMeta{Name: cluster},
			Certs:            map[string]api.CertBundle{},
			Kubeconfigs:      map[string][]byte{},
			KubeconfigServer: "https://127.0.0.1:6443",
			Ready:            true,
		},
		seal: newSealKey(t),
		cas:  map[string]*certs.KeyPair{},
	}
	for _, name := range []string{api.CertRootCA, api.CertEtcdCA, api.CertFrontProxyCA, api.CertKubeletSigner} {
		ca, err := certs.NewCA(cluster+"-"+name, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tp.cas[name] = ca
		tp.store(t, name, ca)
	}
	sa, err := certs.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := sa.PrivatePEM()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sa.PublicPEM()
	if err != nil {
		t.Fatal(err)
	}
	tp.pki.ServiceAccount = api.KeyBundle{PublicPEM: pub, SealedPriv: tp.seal.Seal(priv)}

	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	etcdDNS := append([]string{"localhost"}, etcdHosts...)
	client := func(ca, cn string, orgs ...string) leafReq {
		return leafReq{ca, certs.Request{CommonName: cn, Organizations: orgs, Usage: certs.UsageClient, Lifetime: time.Hour}}
	}
	tp.reqs = map[string]leafReq{
		api.CertEtcdServer: {api.CertEtcdCA, certs.Request{CommonName: "etcd-server", DNSNames: etcdDNS, IPs: loopback,
			Usage: certs.UsageClientServer, Lifetime: time.Hour}},
		api.CertEtcdPeer: {api.CertEtcdCA, certs.Request{CommonName: "etcd-peer", DNSNames: etcdDNS, IPs: loopback,
			Usage: certs.UsageClientServer, Lifetime: time.Hour}},
		api.CertAPIServerEtcdClient: client(api.CertEtcdCA, "kube-apiserver-etcd-client"),
		api.CertAPIServer: {api.CertRootCA, certs.Request{CommonName: "kube-apiserver",
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)}, Usage: certs.UsageServer, Lifetime: time.Hour}},
		api.CertAPIServerKubelet:  client(api.CertRootCA, "kube-apiserver-kubelet-client", "system:masters"),
		api.CertFrontProxyClient:  client(api.CertFrontProxyCA, "front-proxy-client"),
		api.CertAdmin:             client(api.CertRootCA, "kubernetes-admin", "system:masters"),
		api.CertControllerManager: client(api.CertRootCA, "system:kube-controller-manager"),
		api.CertScheduler:         client(api.CertRootCA, "system:kube-scheduler"),
		api.CertKarpenter:         client(api.CertRootCA, "system:hostplane:karpenter", "system:masters"),
	}
	for name := range tp.reqs {
		tp.issue(t, name)
	}
	tp.rekey(t, "key-first")
	return tp
}

// rekey makes a new Secret encryption key called name the only one, as pkid does for a
// record without one.
func (tp *testPKI) rekey(t testing.TB, name string) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	tp.pki.SecretEncryption = &api.EncryptionKeys{Type: api.SecretEncryptionAESCBC,
		Keys: []api.EncryptionKey{{Name: name, Sealed: tp.seal.Seal(key), CreatedAt: time.Now()}}}
}

func (tp *testPKI) store(t testing.TB, name string, kp *certs.KeyPair) {
	t.Helper()
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	tp.pki.Certs[name] = api.CertBundle{
		CertPEM: kp.CertPEM(), SealedKey: tp.seal.Seal(keyPEM),
		Subject: kp.Cert.Subject.String(), Issuer: kp.Cert.Issuer.String(),
		NotBefore: kp.Cert.NotBefore, NotAfter: kp.Cert.NotAfter, IsCA: kp.Cert.IsCA,
	}
}

// issue (re)issues leaf name, re-renders the kubeconfigs and changes the serial, as pkid
// does on a rotation.
func (tp *testPKI) issue(t testing.TB, name string) {
	t.Helper()
	lr := tp.reqs[name]
	kp, err := tp.cas[lr.ca].Issue(lr.req)
	if err != nil {
		t.Fatal(err)
	}
	tp.store(t, name, kp)
	if name == api.CertAdmin {
		keyPEM, err := kp.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		kc, err := kube.Kubeconfig(kube.KubeconfigSpec{Server: tp.pki.KubeconfigServer, CAPEM: tp.cas[api.CertRootCA].CertPEM(),
			ClientCertPEM: kp.CertPEM(), ClientKeyPEM: keyPEM})
		if err != nil {
			t.Fatal(err)
		}
		tp.pki.Kubeconfigs[api.KubeconfigAdmin] = tp.seal.Seal(kc)
	}
	serial := make([]byte, 8)
	_, _ = rand.Read(serial)
	tp.pki.Serial = hex.EncodeToString(serial)
}
