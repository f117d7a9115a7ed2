package localkube

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/portrange"
)

func TestResolvePorts_PicksOnceAndPersists(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir}.withDefaults()
	first, err := resolvePorts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if first.APIServer == 0 || first.EtcdClient == 0 || first.EtcdPeer == 0 {
		t.Fatalf("ports = %+v, want all picked", first)
	}
	if first.APIServer == first.EtcdClient || first.EtcdClient == first.EtcdPeer || first.APIServer == first.EtcdPeer {
		t.Fatalf("ports = %+v, want distinct", first)
	}
	// Kept across restarts, so never from the range outgoing connections take their local
	// ports from: a restarted etcd would find its peer port held by one.
	lo, hi := portrange.Range()
	for _, port := range []int{first.APIServer, first.EtcdClient, first.EtcdPeer} {
		if port < lo || port > hi {
			t.Fatalf("ports = %+v: %d is outside %d-%d, the range outside the kernel's ephemeral one", first, port, lo, hi)
		}
	}
	again, err := resolvePorts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("second resolve = %+v, want the persisted %+v", again, first)
	}
	// An explicit port wins and is persisted.
	cfg.APIServerPort = 1
	explicit, err := resolvePorts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if explicit.APIServer != 1 || explicit.EtcdClient != first.EtcdClient || explicit.EtcdPeer != first.EtcdPeer {
		t.Fatalf("with an explicit port: %+v", explicit)
	}
	cfg.APIServerPort = 0
	if p, _ := resolvePorts(cfg); p.APIServer != 1 {
		t.Fatalf("explicit port not persisted: %+v", p)
	}
}

func TestEnsurePKI_GeneratesOnceAndKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	first, err := ensurePKI(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		files[f] = b
		if strings.HasSuffix(f, ".key") {
			if fi, _ := os.Stat(filepath.Join(dir, f)); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode = %v, want 0600", f, fi.Mode().Perm())
			}
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(first.ca.Cert)
	if _, err := first.apiserver.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "kubernetes.default.svc"}); err != nil {
		t.Errorf("serving cert: %v", err)
	}
	for _, ip := range []string{"127.0.0.1", "10.96.0.1"} {
		if err := first.apiserver.Cert.VerifyHostname(ip); err != nil {
			t.Errorf("serving cert: %v", err)
		}
	}
	if got := first.admin.Cert.Subject.Organization; !slices.Equal(got, []string{"system:masters"}) {
		t.Errorf("admin organizations = %v", got)
	}

	if _, err := ensurePKI(dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for f, before := range files {
		after, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(before, after) {
			t.Errorf("%s changed on the second start", f)
		}
	}

	// A new host needs a new serving certificate from the same CA; the rest stays.
	second, err := ensurePKI(dir, "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if err := second.apiserver.Cert.VerifyHostname("192.0.2.7"); err != nil {
		t.Errorf("reissued serving cert: %v", err)
	}
	if !second.ca.Cert.Equal(first.ca.Cert) || !second.admin.Cert.Equal(first.admin.Cert) {
		t.Error("the CA or the admin cert changed with the host")
	}
}

func TestFits(t *testing.T) {
	ca, err := certs.NewCA("ca", 24*time.Hour*3650)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := certs.NewCA("other", time.Hour)
	req := certs.Request{CommonName: "s", DNSNames: []string{"a"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: certs.UsageServer, Lifetime: 365 * 24 * time.Hour}
	issue := func(ca *certs.KeyPair, r certs.Request) *x509.Certificate {
		kp, err := ca.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return kp.Cert
	}
	short := req
	short.Lifetime = 24 * time.Hour
	fewer := req
	fewer.DNSNames = nil
	tests := []struct {
		name string
		cert *x509.Certificate
		want bool
	}{
		{"same request", issue(ca, req), true},
		{"another CA", issue(other, req), false},
		{"expires soon", issue(ca, short), false},
		{"missing a name", issue(ca, fewer), false},
	}
	for _, tt := range tests {
		if got := fits(tt.cert, ca.Cert, req); got != tt.want {
			t.Errorf("%s: fits = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAPIServerArgs_LoopbackDisablesEndpointReconciler(t *testing.T) {
	p := ports{APIServer: 6443, EtcdClient: 2379, EtcdPeer: 2380}
	keys := pki{dir: "/x/pki"}
	loop := apiserverArgs(Config{Host: "127.0.0.1", ExtraAPIServerArgs: []string{"--v=2"}}.withDefaults(), p, keys, "http://127.0.0.1:2379")
	if !slices.Contains(loop, "--endpoint-reconciler-type=none") || loop[len(loop)-1] != "--v=2" {
		t.Errorf("loopback args = %v", loop)
	}
	for _, want := range []string{"--secure-port=6443", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--etcd-servers=http://127.0.0.1:2379", "--client-ca-file=/x/pki/ca.crt", "--authorization-mode=Node,RBAC"} {
		if !slices.Contains(loop, want) {
			t.Errorf("args lack %s", want)
		}
	}
	routed := apiserverArgs(Config{Host: "192.0.2.7"}.withDefaults(), p, keys, "http://127.0.0.1:2379")
	if slices.Contains(routed, "--endpoint-reconciler-type=none") {
		t.Errorf("non-loopback args = %v", routed)
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir, no supervisor", Config{}, "no Dir; no Supervisor"},
		{"hostname", Config{Dir: "d", Host: "localhost"}, "not a specific IP"},
		{"unspecified", Config{Dir: "d", Host: "0.0.0.0"}, "not a specific IP"},
		{"bad port", Config{Dir: "d", APIServerPort: 70000}, "APIServerPort 70000"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString(strings.Repeat("x", i%7) + "line\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(tail(path, 5), "\n"); got != 4 {
		t.Errorf("tail(5) has %d newlines, want 4", got)
	}
	if got := tail(filepath.Join(t.TempDir(), "missing"), 5); !strings.Contains(got, "no log") {
		t.Errorf("tail of a missing file = %q", got)
	}
}
