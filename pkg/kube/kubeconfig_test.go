package kube

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
	"k8s.io/client-go/tools/clientcmd"
)

type testPKI struct {
	ca, server, client *certs.KeyPair
	clientKeyPEM       []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	ca, err := certs.NewCA("kube-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(certs.Request{CommonName: "apiserver", IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: certs.UsageServer, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(certs.Request{CommonName: "admin", Organizations: []string{"system:masters"},
		Usage: certs.UsageClient, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	key, err := client.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{ca: ca, server: server, client: client, clientKeyPEM: key}
}

func TestKubeconfig_Validate(t *testing.T) {
	p := newTestPKI(t)
	ok := KubeconfigSpec{Server: "https://127.0.0.1:6443", CAPEM: p.ca.CertPEM(), Token: "t"}
	tests := []struct {
		name   string
		modify func(*KubeconfigSpec)
		valid  bool
	}{
		{"token", func(*KubeconfigSpec) {}, true},
		{"client cert", func(s *KubeconfigSpec) {
			s.Token, s.ClientCertPEM, s.ClientKeyPEM = "", p.client.CertPEM(), p.clientKeyPEM
		}, true},
		{"no server", func(s *KubeconfigSpec) { s.Server = "" }, false},
		{"http server", func(s *KubeconfigSpec) { s.Server = "http://127.0.0.1:6443" }, false},
		{"no host", func(s *KubeconfigSpec) { s.Server = "https://" }, false},
		{"no CA", func(s *KubeconfigSpec) { s.CAPEM = nil }, false},
		{"no credentials", func(s *KubeconfigSpec) { s.Token = "" }, false},
		{"both credentials", func(s *KubeconfigSpec) { s.ClientCertPEM, s.ClientKeyPEM = p.client.CertPEM(), p.clientKeyPEM }, false},
		{"cert without key", func(s *KubeconfigSpec) { s.Token, s.ClientCertPEM = "", p.client.CertPEM() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := ok
			tt.modify(&spec)
			_, err := Kubeconfig(spec)
			if tt.valid && err != nil {
				t.Fatalf("Kubeconfig: %v", err)
			}
			if !tt.valid && !errors.Is(err, ErrInvalidKubeconfig) {
				t.Fatalf("err = %v, want ErrInvalidKubeconfig", err)
			}
		})
	}
}

func TestKubeconfig_ClientCert(t *testing.T) {
	p := newTestPKI(t)
	out, err := Kubeconfig(KubeconfigSpec{
		Server: "https://127.0.0.1:6443", CAPEM: p.ca.CertPEM(),
		ClientCertPEM: p.client.CertPEM(), ClientKeyPEM: p.clientKeyPEM,
		ClusterName: "mgmt", UserName: "root", Namespace: "hostplane",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatalf("clientcmd.Load: %v", err)
	}
	if cfg.CurrentContext != "root@mgmt" {
		t.Errorf("current context = %q", cfg.CurrentContext)
	}
	kctx := cfg.Contexts["root@mgmt"]
	if kctx == nil || kctx.Cluster != "mgmt" || kctx.AuthInfo != "root" || kctx.Namespace != "hostplane" {
		t.Fatalf("context = %+v", kctx)
	}
	if c := cfg.Clusters["mgmt"]; c == nil || c.Server != "https://127.0.0.1:6443" || string(c.CertificateAuthorityData) != string(p.ca.CertPEM()) {
		t.Fatalf("cluster = %+v", c)
	}
	if u := cfg.AuthInfos["root"]; u == nil || string(u.ClientCertificateData) != string(p.client.CertPEM()) ||
		string(u.ClientKeyData) != string(p.clientKeyPEM) || u.Token != "" {
		t.Fatalf("user = %+v", u)
	}

	rc, err := RESTConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || len(rc.CAData) == 0 || len(rc.CertData) == 0 || len(rc.KeyData) == 0 {
		t.Fatalf("rest config = %+v", rc)
	}
}

func TestKubeconfig_TokenDefaults(t *testing.T) {
	p := newTestPKI(t)
	out, err := Kubeconfig(KubeconfigSpec{Server: "https://10.0.0.1:443", CAPEM: p.ca.CertPEM(), Token: "abc.def"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "admin@hostplane" || cfg.AuthInfos["admin"] == nil || cfg.AuthInfos["admin"].Token != "abc.def" {
		t.Fatalf("config = %+v", cfg)
	}
	rc, err := RESTConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if rc.BearerToken != "abc.def" {
		t.Fatalf("BearerToken = %q", rc.BearerToken)
	}
}

func TestRESTConfig_RejectsGarbage(t *testing.T) {
	if _, err := RESTConfig([]byte("not: [a kubeconfig")); err == nil {
		t.Fatal("want an error")
	}
	if _, err := RESTConfig(nil); err == nil {
		t.Fatal("want an error for an empty kubeconfig")
	}
}

// TestClientset_TalksMutualTLS serves /version over TLS, requiring a client certificate
// from the CA, and checks the clientset built from the kubeconfig reaches it.
func TestClientset_TalksMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	clientCN := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		select {
		case clientCN <- r.TLS.PeerCertificates[0].Subject.CommonName:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
	}))
	serverKey, err := p.server.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(p.server.CertPEM(), serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	kc, err := Kubeconfig(KubeconfigSpec{Server: srv.URL, CAPEM: p.ca.CertPEM(),
		ClientCertPEM: p.client.CertPEM(), ClientKeyPEM: p.clientKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Clientset(kc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	if v.GitVersion != "v1.34.4" {
		t.Fatalf("version = %+v", v)
	}
	if cn := <-clientCN; cn != "admin" {
		t.Fatalf("client CN = %q, want admin", cn)
	}
}
