package mtls_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/mtls"
)

// serve runs handler behind cfg's TLS and middleware on a free port and returns its https
// base URL for host.
func serve(t *testing.T, cfg mtls.ServerConfig, host string) string {
	t.Helper()
	tc, err := cfg.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/v1/clusters", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	})
	srv := httpapi.NewServer("127.0.0.1:0", cfg.Middleware(mux), nil)
	srv.TLSConfig = tc
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, port, _ := cutPort(srv.Addr())
	return "https://" + host + ":" + port
}

func cutPort(addr string) (string, string, bool) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], true
		}
	}
	return addr, "", false
}

// get sends GET url with a fresh connection of client cfg and returns the status and body, or
// the transport's error.
func get(t *testing.T, cfg mtls.ClientConfig, url string) (int, string, error) {
	t.Helper()
	tr, err := cfg.Transport()
	if err != nil {
		t.Fatal(err)
	}
	tr.DisableKeepAlives = true
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func generate(t *testing.T, dir string) mtls.Files {
	t.Helper()
	f, err := mtls.Generate(dir, []string{"pkid", "clusterd"}, []string{"127.0.0.1", "localhost", "{daemon}.hostplane-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDaemonPort_WithAClientCA_AnswersTheAPIOnlyToTheGatewaysCertificate(t *testing.T) {
	f := generate(t, t.TempDir())
	other := generate(t, t.TempDir()) // another management CA
	url := serve(t, f.Server("pkid"), "127.0.0.1")

	gw := f.Gateway()
	if code, body, err := get(t, gw, url+"/v1/clusters"); err != nil || code != http.StatusOK || body != mtls.ClientName {
		t.Errorf("the gateway's certificate: %d %q %v, want 200 from %s", code, body, err, mtls.ClientName)
	}
	noCert := mtls.ClientConfig{CAFile: f.CAFile()}
	if code, body, err := get(t, noCert, url+"/v1/clusters"); err != nil || code != http.StatusForbidden {
		t.Errorf("no client certificate: %d %q %v, want 403", code, body, err)
	}
	if code, _, err := get(t, noCert, url+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz without a client certificate: %d %v, want 200 (probes)", code, err)
	}
	foreign := other.Gateway()
	foreign.CAFile = f.CAFile() // trusts the server, presents another CA's gateway certificate
	if code, _, err := get(t, foreign, url+"/v1/clusters"); err == nil {
		t.Errorf("another CA's gateway certificate: %d, want the handshake refused", code)
	}
	if code, _, err := get(t, foreign, url+"/healthz"); err == nil {
		t.Errorf("another CA's certificate on /healthz: %d, want the handshake refused (a certificate given is verified)", code)
	}
	// The management CA's certificate for another name is not the gateway's.
	ca, err := certs.Dir{Path: f.Dir}.CA()
	if err != nil {
		t.Fatal(err)
	}
	intruder := writePair(t, ca, "intruder", certs.UsageClient)
	intruder.CAFile = f.CAFile()
	if code, _, err := get(t, intruder, url+"/v1/clusters"); err != nil || code != http.StatusForbidden {
		t.Errorf("a management-CA client certificate for another name: %d %v, want 403", code, err)
	}
	// A client that trusts another CA refuses the daemon.
	if _, _, err := get(t, other.Gateway(), url+"/healthz"); err == nil {
		t.Error("a client trusting another CA accepted the daemon's certificate")
	}
	// The daemon's name in the URL is checked too.
	if _, _, err := get(t, gw, serve(t, f.Server("clusterd"), "127.0.0.1")+"/healthz"); err != nil {
		t.Errorf("clusterd by IP: %v", err)
	}
}

func TestDaemonPort_AllowDirect_AnswersWithoutACertificate(t *testing.T) {
	f := generate(t, t.TempDir())
	cfg := f.Server("pkid")
	cfg.AllowDirect = true
	url := serve(t, cfg, "localhost")
	if code, _, err := get(t, mtls.ClientConfig{CAFile: f.CAFile()}, url+"/v1/healthz-not"); err != nil || code != http.StatusNotFound {
		t.Errorf("direct call with AllowDirect: %d %v, want the handler's 404", code, err)
	}
}

func TestRotation_NewCertificatesAreUsedAtTheNextHandshakeWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	f := generate(t, dir)
	url := serve(t, f.Server("pkid"), "localhost")
	serial := func() string {
		tr, err := f.Gateway().Transport()
		if err != nil {
			t.Fatal(err)
		}
		tr.DisableKeepAlives = true
		resp, err := (&http.Client{Transport: tr}).Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if err := os.Remove(filepath.Join(dir, "pkid.crt")); err != nil {
		t.Fatal(err)
	}
	generate(t, dir) // issues pkid's certificate again
	if after := serial(); after == before {
		t.Fatalf("the daemon still serves serial %s after its certificate was rotated", before)
	}
	// The gateway's certificate is rotated the same way; the daemon still accepts it.
	if err := os.Remove(filepath.Join(dir, mtls.GatewayCertFile)); err != nil {
		t.Fatal(err)
	}
	generate(t, dir)
	if code, body, err := get(t, f.Gateway(), url+"/v1/clusters"); err != nil || code != http.StatusOK {
		t.Errorf("with a rotated gateway certificate: %d %q %v", code, body, err)
	}
	// A half-written pair (a new key, the old certificate) keeps the previous pair in use.
	if err := os.WriteFile(filepath.Join(dir, "pkid.key"), mustKeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(t, f.Gateway(), url+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("during a half-done rotation: %d %v, want the previous pair served", code, err)
	}
}

func mustKeyPEM(t *testing.T) []byte {
	ca, err := certs.NewCA("x", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writePair issues a leaf of ca for cn and writes it to a temporary directory.
func writePair(t *testing.T, ca *certs.KeyPair, cn string, usage certs.Usage) mtls.ClientConfig {
	t.Helper()
	kp, err := ca.Issue(certs.Request{CommonName: cn, Usage: usage, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _ := kp.KeyPEM()
	c := mtls.ClientConfig{CertFile: filepath.Join(dir, "c.crt"), KeyFile: filepath.Join(dir, "c.key")}
	if err := os.WriteFile(c.CertFile, kp.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.KeyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerConfig_Validate(t *testing.T) {
	for _, c := range []mtls.ServerConfig{{CertFile: "a"}, {KeyFile: "b"}, {ClientCAFile: "ca"}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := (mtls.ServerConfig{CertFile: "/nonexistent", KeyFile: "/nonexistent"}).TLSConfig(); err == nil {
		t.Error("missing files: no error at start")
	}
}
