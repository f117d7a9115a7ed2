// Package localcloudtest serves Ignition configs to local-cloud machines in tests: a small
// HTTPS Ignition server built with the coreos/ignition types, and builders for the stub a
// machine boots with and the payload a worker fetches (docs/nodepool-flow.md, step 5).
package localcloudtest

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// IgnitionServer is a small HTTPS Ignition server for tests, built with the coreos/ignition
// types as ignitiond is: GET /ignition with "Authorization: Bearer <token>" answers the
// payload set for that token, 401 otherwise.
type IgnitionServer struct {
	URL   string // https://127.0.0.1:port/ignition
	CAPEM []byte

	srv      *httptest.Server
	mu       sync.Mutex
	payloads map[string][]byte // by token
	// Refuse answers 401 to that many requests before serving.
	Refuse   atomic.Int64
	Requests atomic.Int64
}

// NewIgnitionServer starts one with a fresh CA; it stops when the test ends.
func NewIgnitionServer(t testing.TB) *IgnitionServer {
	t.Helper()
	ca, err := certs.NewCA("ignition-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(certs.Request{CommonName: "ignition-server", IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: certs.UsageServer, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := &IgnitionServer{CAPEM: ca.CertPEM(), payloads: map[string][]byte{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/ignition"
	return s
}

func (s *IgnitionServer) serve(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	if r.URL.Path != "/ignition" {
		http.NotFound(w, r)
		return
	}
	if s.Refuse.Add(-1) >= 0 {
		http.Error(w, "not yet", http.StatusUnauthorized)
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	body, ok := s.payloads[token]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", ignition.MediaType)
	_, _ = w.Write(body)
}

// Set serves cfg to token.
func (s *IgnitionServer) Set(t testing.TB, token string, cfg igntypes.Config) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRaw(token, b)
}

// SetRaw serves raw bytes to token.
func (s *IgnitionServer) SetRaw(token string, raw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payloads[token] = raw
}

// Stub is the userdata a machine boots with to fetch token's config.
func (s *IgnitionServer) Stub(t testing.TB, token string) []byte {
	t.Helper()
	return Stub(t, s.URL, token, s.CAPEM)
}

// Stub is the stub ignitiond renders (ignition.Stub): merge the config at url with a bearer
// token, trusting caPEM.
func Stub(t testing.TB, url, token string, caPEM []byte) []byte {
	t.Helper()
	b, err := ignition.Stub(ignition.StubInfo{URL: url, Token: token, CAPEM: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// File is one file of a payload.
type File struct {
	Path      string
	Contents  string
	Mode      int
	Overwrite bool
}

// Payload is an Ignition config writing files (as base64 data URLs).
func Payload(files ...File) igntypes.Config {
	cfg := igntypes.Config{Ignition: igntypes.Ignition{Version: igntypes.MaxVersion.String()}}
	for _, f := range files {
		file := igntypes.File{Node: igntypes.Node{Path: f.Path}}
		file.Contents.Source = new(ignition.DataURL([]byte(f.Contents)))
		if f.Mode != 0 {
			file.Mode = new(f.Mode)
		}
		if f.Overwrite {
			file.Overwrite = new(true)
		}
		cfg.Storage.Files = append(cfg.Storage.Files, file)
	}
	return cfg
}

// The files a worker's payload writes (localcloud.Path*).
const (
	PathBootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubeconfig"
	PathKubeletConfig       = "/etc/kubernetes/kubelet.json"
	PathKubeletCA           = "/etc/kubernetes/pki/ca.crt"
)

// NodePayload is the payload of a worker: bootstrap kubeconfig, kubelet.json (kubelet, a
// localcloud.KubeletConfig, JSON encoded) and CA.
func NodePayload(t testing.TB, bootstrapKubeconfig, caPEM []byte, kubelet any) igntypes.Config {
	t.Helper()
	b, err := json.Marshal(kubelet)
	if err != nil {
		t.Fatal(err)
	}
	return Payload(
		File{Path: PathBootstrapKubeconfig, Contents: string(bootstrapKubeconfig), Mode: 0o600, Overwrite: true},
		File{Path: PathKubeletConfig, Contents: string(b), Mode: 0o644, Overwrite: true},
		File{Path: PathKubeletCA, Contents: string(caPEM), Mode: 0o644, Overwrite: true},
	)
}
