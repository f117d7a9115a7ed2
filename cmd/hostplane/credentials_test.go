package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// TestCLI_Credentials_MintedIdentityWorksOnARunningDevStackUntilRevoked: `hostplane
// credentials create` against a running `hostplane dev` gives another system a NATS identity
// it can connect with, without a restart; `revoke` closes its connection and refuses the seed.
func TestCLI_Credentials_MintedIdentityWorksOnARunningDevStackUntilRevoked(t *testing.T) {
	s, _ := startStack(t)
	hp := newCLI(t, "", "")
	dir := s.NATSCreds.Dir

	out := hp.must(0, "credentials", "create", "inbox-publisher", "ingest", "--cluster", "demo", "--dir", dir).stdout
	seed := filepath.Join(dir, "ingest"+natsauth.SeedExt)
	for _, want := range []string{seed, "hostplane.in.demo.", "--inbox-prefix _INBOX_ingest", "tls://", "--tlsca " + s.NATSTLS.CAFile()} {
		if !strings.Contains(out, want) {
			t.Errorf("create says nothing of %q:\n%s", want, out)
		}
	}
	kept, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	keptFile := filepath.Join(t.TempDir(), "ingest.nk")
	if err := os.WriteFile(keptFile, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	list := hp.must(0, "credentials", "list", "--dir", dir).stdout
	if !strings.Contains(list, "ingest") || !strings.Contains(list, natsauth.KindInboxPublisher) || !strings.Contains(list, "demo") {
		t.Errorf("list does not show the minted identity:\n%s", list)
	}

	connect := func(file string) (*nats.Conn, chan struct{}, error) {
		opts, err := natsauth.ClientOptions("ingest", file, s.NATSTLS.Client())
		if err != nil {
			return nil, nil, err
		}
		closed := make(chan struct{})
		nc, err := nats.Connect(s.NATS.URL(), append(opts, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))...)
		return nc, closed, err
	}
	var (
		nc     *nats.Conn
		closed chan struct{}
	)
	testenv.Eventually(t, 15*time.Second, func() bool {
		nc, closed, err = connect(seed)
		return err == nil
	}, "the running dev stack never accepted the minted identity")
	defer nc.Close()

	hp.must(0, "credentials", "revoke", "ingest", "--dir", dir)
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the revoked identity's connection stayed open")
	}
	if _, _, err := connect(keptFile); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connecting with the revoked seed: %v, want an authorization error", err)
	}

	// Mistakes are usage errors that say what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"credentials", "create", "superuser", "x", "--dir", dir}, "valid kinds"},
		{[]string{"credentials", "create", "event-consumer", "pkid", "--dir", dir}, "built-in"},
		{[]string{"credentials", "revoke", "nobody", "--dir", dir}, "no such identity"},
	} {
		if r := hp.must(2, tc.args...); !strings.Contains(r.stderr, tc.want) {
			t.Errorf("hostplane %s: stderr does not say %q:\n%s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}

// TestCLI_Credentials_K8sSecrets_GiveEachPodOnlyItsOwnSeed: the Secrets deploy/k8s mounts
// carry the server's auth.conf, the NATS members' TLS files (never the CA key) and one seed
// (with the CA certificate) each for bootstrap and every daemon, exactly the files
// `credentials init` made; the admin's and other systems' seeds never leave the directory.
func TestCLI_Credentials_K8sSecrets_GiveEachPodOnlyItsOwnSeed(t *testing.T) {
	hp := newCLI(t, "", "")
	dir := filepath.Join(t.TempDir(), "creds")
	hp.must(0, "credentials", "init", "--dir", dir)
	// deploy/k8s is TLS-only: without the TLS files there is nothing to print.
	if r := hp.run("credentials", "k8s-secrets", "--dir", dir); r.code == 0 || !strings.Contains(r.stderr, "--tls-route-host") {
		t.Errorf("k8s-secrets without TLS files: exit %d, stderr %q; want a failure naming --tls-route-host", r.code, r.stderr)
	}
	hp.must(0, "credentials", "init", "--dir", dir, "--tls-host", "nats", "--tls-route-host", "*.nats-headless")
	// ... nor without the management TLS files.
	if r := hp.run("credentials", "k8s-secrets", "--dir", dir); r.code == 0 || !strings.Contains(r.stderr, "--mgmt-tls-host") {
		t.Errorf("k8s-secrets without management TLS files: exit %d, stderr %q; want a failure naming --mgmt-tls-host", r.code, r.stderr)
	}
	hp.must(0, "credentials", "init", "--dir", dir, "--tls-host", "nats", "--tls-route-host", "*.nats-headless", "--mgmt-tls-host", "{daemon}.hp.svc")
	hp.must(0, "credentials", "create", "event-consumer", "audit", "--dir", dir)
	out := hp.must(0, "credentials", "k8s-secrets", "--dir", dir, "--namespace", "hp").stdout

	got := map[string]map[string][]byte{}
	for _, doc := range strings.Split(out, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s corev1.Secret
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatalf("not a Secret: %v\n%s", err, doc)
		}
		if s.Kind != "Secret" || s.Namespace != "hp" {
			t.Errorf("%s: kind %q namespace %q", s.Name, s.Kind, s.Namespace)
		}
		got[s.Name] = s.Data
	}
	// Secret → key → the file it must hold.
	tlsDir := filepath.Join(dir, "tls")
	ca := filepath.Join(tlsDir, natsauth.TLSCAFile)
	want := map[string]map[string]string{
		"nats-auth": {natsauth.ServerConfigFile: filepath.Join(dir, natsauth.ServerConfigFile)},
		"nats-tls":  {},
	}
	for _, f := range []string{natsauth.TLSCAFile, natsauth.TLSCertFile, natsauth.TLSKeyFile, natsauth.TLSRouteCertFile, natsauth.TLSRouteKeyFile} {
		want["nats-tls"][f] = filepath.Join(tlsDir, f)
	}
	for _, name := range append([]string{natsauth.Bootstrap}, daemonNames()...) {
		want["nats-creds-"+name] = map[string]string{"nkey": filepath.Join(dir, name+natsauth.SeedExt), natsauth.TLSCAFile: ca}
	}
	want["hostplane-seal-key"] = map[string]string{"pki.key": filepath.Join(dir, "pki.key")}
	want["localcloud-token"] = map[string]string{"token": filepath.Join(dir, "localcloud.token")}
	want["hostplane-metrics-token"] = map[string]string{"token": filepath.Join(dir, "metrics.token")}
	mgmtDir := filepath.Join(dir, "mgmt-tls")
	for _, name := range append(daemonNames(), "gateway") {
		want["mgmt-tls-"+name] = map[string]string{"tls.crt": filepath.Join(mgmtDir, name+".crt"), "tls.key": filepath.Join(mgmtDir, name+".key"),
			natsauth.TLSCAFile: filepath.Join(mgmtDir, natsauth.TLSCAFile)}
	}
	if len(got) != len(want) {
		t.Errorf("Secrets %v, want exactly %v", keys(got), keys(want))
	}
	if leaf, err := certs.ParseCertificate(got["mgmt-tls-pkid"]["tls.crt"]); err != nil || leaf.VerifyHostname("pkid.hp.svc") != nil || leaf.VerifyHostname("pkid") != nil {
		t.Errorf("pkid's admin certificate does not name pkid and pkid.hp.svc ({daemon}.hp.svc): %v", err)
	}
	caKey, err := os.ReadFile(filepath.Join(tlsDir, natsauth.TLSCAKey))
	if err != nil {
		t.Fatal(err)
	}
	mgmtCAKey, err := os.ReadFile(filepath.Join(mgmtDir, natsauth.TLSCAKey))
	if err != nil {
		t.Fatal(err)
	}
	for name, files := range want {
		data, ok := got[name]
		if !ok || len(data) != len(files) {
			t.Errorf("Secret %s has keys %v, want exactly %v", name, keys(data), keys(files))
		}
		for key, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if string(data[key]) != string(b) {
				t.Errorf("Secret %s does not hold %s under %s", name, file, key)
			}
		}
		for key, v := range data {
			if bytes.Equal(v, caKey) || bytes.Equal(v, mgmtCAKey) {
				t.Errorf("Secret %s holds a CA's private key under %s", name, key)
			}
		}
	}
	if !strings.Contains(string(got["nats-auth"][natsauth.ServerConfigFile]), "# audit") {
		t.Error("nats-auth's auth.conf lacks the minted identity audit")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCLI_Credentials_InitWithTLSHosts_WritesACAAndAServerCertificateOnce: what docker
// compose's nats-creds one-shot runs; a second run keeps the files.
func TestCLI_Credentials_InitWithTLSHosts_WritesACAAndAServerCertificateOnce(t *testing.T) {
	hp := newCLI(t, "", "")
	dir := filepath.Join(t.TempDir(), "creds")
	hp.must(0, "credentials", "init", "--dir", dir, "--tls-host", "nats", "--tls-host", "127.0.0.1")
	tlsDir := filepath.Join(dir, "tls")
	crt, err := os.ReadFile(filepath.Join(tlsDir, natsauth.TLSCertFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.VerifyHostname("nats") != nil || leaf.VerifyHostname("127.0.0.1") != nil {
		t.Errorf("server certificate for %v %v, want nats and 127.0.0.1", leaf.DNSNames, leaf.IPAddresses)
	}
	if fi, err := os.Stat(filepath.Join(tlsDir, natsauth.TLSKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server key: %v, want mode 0600", err)
	}
	hp.must(0, "credentials", "init", "--dir", dir, "--tls-host", "nats", "--tls-host", "127.0.0.1")
	if again, _ := os.ReadFile(filepath.Join(tlsDir, natsauth.TLSCertFile)); !bytes.Equal(again, crt) {
		t.Error("a second init replaced the server certificate")
	}
}

// TestCLI_Credentials_InitWithTLSRouteHosts_WritesARouteCertificateForEveryMember: what
// deploy/k8s needs for its three NATS members' routes: one certificate from the same CA,
// server and client (nats-server runs routes with mutual TLS), for every member's name
// through a wildcard; kept by a second run; refused without --tls-host.
func TestCLI_Credentials_InitWithTLSRouteHosts_WritesARouteCertificateForEveryMember(t *testing.T) {
	hp := newCLI(t, "", "")
	dir := filepath.Join(t.TempDir(), "creds")
	if r := hp.run("credentials", "init", "--dir", dir, "--tls-route-host", "*.nats-headless"); r.code != 2 {
		t.Errorf("--tls-route-host without --tls-host: exit %d (%s), want 2", r.code, r.stderr)
	}
	args := []string{"credentials", "init", "--dir", dir, "--tls-host", "nats",
		"--tls-route-host", "*.nats-headless", "--tls-route-host", "*.nats-headless.hostplane-system.svc"}
	hp.must(0, args...)
	tlsDir := filepath.Join(dir, "tls")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tlsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	crt := read(natsauth.TLSRouteCertFile)
	leaf, err := certs.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.ParseCertificate(read(natsauth.TLSCAFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Errorf("route certificate not signed by the NATS CA: %v", err)
	}
	for _, h := range []string{"nats-0.nats-headless", "nats-2.nats-headless", "nats-1.nats-headless.hostplane-system.svc"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("route certificate does not name %s: %v", h, err)
		}
	}
	if leaf.VerifyHostname("nats") == nil {
		t.Error("route certificate names the client Service nats: it is for the routes only")
	}
	usages := map[x509.ExtKeyUsage]bool{}
	for _, u := range leaf.ExtKeyUsage {
		usages[u] = true
	}
	if !usages[x509.ExtKeyUsageServerAuth] || !usages[x509.ExtKeyUsageClientAuth] {
		t.Errorf("route certificate usages %v, want server and client authentication", leaf.ExtKeyUsage)
	}
	if fi, err := os.Stat(filepath.Join(tlsDir, natsauth.TLSRouteKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("route key: %v, want mode 0600", err)
	}
	hp.must(0, args...)
	if !bytes.Equal(read(natsauth.TLSRouteCertFile), crt) {
		t.Error("a second init replaced the route certificate")
	}
}
