package main

import (
	"bytes"
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
// carry the server's auth.conf and one seed each for bootstrap and every daemon, exactly the
// files `credentials init` made; the admin's and other systems' seeds never leave the directory.
func TestCLI_Credentials_K8sSecrets_GiveEachPodOnlyItsOwnSeed(t *testing.T) {
	hp := newCLI(t, "", "")
	dir := filepath.Join(t.TempDir(), "creds")
	hp.must(0, "credentials", "init", "--dir", dir)
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
	want := map[string]string{"nats-auth": filepath.Join(dir, natsauth.ServerConfigFile)}
	for _, name := range append([]string{natsauth.Bootstrap}, daemonNames()...) {
		want["nats-creds-"+name] = filepath.Join(dir, name+natsauth.SeedExt)
	}
	if len(got) != len(want) {
		t.Errorf("Secrets %v, want exactly %v", keys(got), keys(want))
	}
	for name, file := range want {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		key := "nkey"
		if name == "nats-auth" {
			key = natsauth.ServerConfigFile
		}
		if data, ok := got[name]; !ok || len(data) != 1 || string(data[key]) != string(b) {
			t.Errorf("Secret %s does not hold exactly %s under %s", name, file, key)
		}
	}
	if !strings.Contains(string(got["nats-auth"][natsauth.ServerConfigFile]), "# audit") {
		t.Error("nats-auth's auth.conf lacks the minted identity audit")
	}
}

func daemonNames() []string {
	var out []string
	for _, d := range natsauth.Daemons {
		out = append(out, d.Name)
	}
	return out
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
