package natsauth_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// tlsDir generates a NATS CA and a server certificate for 127.0.0.1 in a new directory.
func tlsDir(t *testing.T) *natsauth.TLSFiles {
	t.Helper()
	f, err := natsauth.GenerateTLS(filepath.Join(t.TempDir(), "tls"), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// clientCert issues a client certificate from the CA in f and writes it to a new directory.
func clientCert(t *testing.T, f *natsauth.TLSFiles, name string) natsauth.TLS {
	t.Helper()
	crt, _ := os.ReadFile(f.CAFile())
	key, _ := os.ReadFile(filepath.Join(f.Dir, natsauth.TLSCAKey))
	ca, err := certs.ParseKeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(certs.Request{CommonName: name, Usage: certs.UsageClient, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := natsauth.TLS{CAFile: f.CAFile(), CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	keyPEM, _ := kp.KeyPEM()
	if err := os.WriteFile(out.CertFile, kp.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// connectTLS connects as identity name with tls, without retrying.
func connectTLS(env *testenv.NATSEnv, name string, tls natsauth.TLS) (*nats.Conn, error) {
	opts, err := natsauth.ClientOptions(name, env.SeedFile(name), tls)
	if err != nil {
		return nil, err
	}
	return nats.Connect(env.Server.URL(), append(opts, nats.NoReconnect(), nats.Timeout(5*time.Second))...)
}

// refused fails the test unless err is a refused connection.
func refused(t *testing.T, what string, nc *nats.Conn, err error) {
	t.Helper()
	if err == nil {
		nc.Close()
		t.Fatalf("%s: connected, want refused", what)
	}
	t.Logf("%s: refused: %v", what, err)
}

func TestTLS_PlainTextClient_IsRefused(t *testing.T) {
	f := tlsDir(t)
	env := testenv.NATSWith(t, testenv.NATSOptions{TLS: f.Server(), ClientTLS: f.Client()})
	if !strings.HasPrefix(env.Server.URL(), "tls://") {
		t.Errorf("URL = %s, want tls://", env.Server.URL())
	}
	// A client that speaks the NATS protocol in plain text: the server announces that it
	// requires TLS and then closes the connection without ever answering.
	testenv.RequirePlainTextRefused(t, env.Server.URL())

	// nats.go upgrades to TLS when the server requires it, but trusts only the system's roots
	// without a CA: the server's certificate is not trusted.
	nc, err := connectTLS(env, natsauth.Admin, natsauth.TLS{})
	refused(t, "no CA", nc, err)
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("no CA: %v, want a certificate verification error", err)
	}
}

func TestTLS_ClientTrustingAnotherCA_CannotConnect(t *testing.T) {
	f, other := tlsDir(t), tlsDir(t)
	env := testenv.NATSWith(t, testenv.NATSOptions{TLS: f.Server(), ClientTLS: f.Client()})
	nc, err := connectTLS(env, natsauth.Admin, other.Client())
	refused(t, "another CA", nc, err)
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("another CA: %v, want a certificate verification error", err)
	}
	// bus.Connect gives up at once instead of retrying forever.
	opts, err := natsauth.ClientOptions(natsauth.Admin, env.SeedFile(natsauth.Admin), other.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.Connect(ctx, env.Server.URL(), "impostor", nil, opts...); err == nil || ctx.Err() != nil {
		t.Fatalf("bus.Connect trusting another CA: %v, want an error before the deadline", err)
	}
}

func TestTLS_Mutual_RefusesClientsWithoutACertificateOfItsCA(t *testing.T) {
	f, other := tlsDir(t), tlsDir(t)
	server := f.Server()
	server.ClientCAFile = f.CAFile()
	pkid := clientCert(t, f, "pkid")
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true, TLS: server, ClientTLS: clientCert(t, f, natsauth.Admin)})

	nc, err := connectTLS(env, "pkid", f.Client())
	refused(t, "no client certificate", nc, err)
	foreign := clientCert(t, other, "pkid")
	foreign.CAFile = f.CAFile() // trusts the server, but its certificate comes from another CA
	nc, err = connectTLS(env, "pkid", foreign)
	refused(t, "client certificate of another CA", nc, err)
	// A valid certificate does not replace the nkey: without the seed's signature, no entry.
	tlsOpts, err := pkid.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err = nats.Connect(env.Server.URL(), append(tlsOpts, nats.NoReconnect())...)
	refused(t, "client certificate without an nkey", nc, err)
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("certificate without an nkey: %v, want an authorization violation", err)
	}

	// The legitimate identity connects, and its permissions still apply.
	env.TLS = pkid
	c := connect(t, env, "pkid")
	state, err := c.nc.TLSConnectionState()
	if err != nil || len(state.PeerCertificates) == 0 {
		t.Fatalf("pkid's connection is not TLS: %v", err)
	}
	c.allowed(t, "$KV."+bus.BucketPKI+".probe")
	c.allowed(t, events.EventPrefix+".demo.pki.probe")
	c.denied(t, "$KV."+bus.BucketClusters+".probe")
	c.denied(t, "$JS.API.STREAM.DELETE."+events.EventsStream)
}

func TestTLS_IdentityOverTLS_KeepsItsPermissions(t *testing.T) {
	f := tlsDir(t)
	env := testenv.NATSWith(t, testenv.NATSOptions{AllowViolations: true, TLS: f.Server(), ClientTLS: f.Client()})
	c := connect(t, env, "infrad")
	if _, err := c.nc.TLSConnectionState(); err != nil {
		t.Fatalf("infrad's connection is not TLS: %v", err)
	}
	c.allowed(t, "$KV."+bus.BucketInfra+".probe")
	c.denied(t, "$KV."+bus.BucketPKI+".probe")
	c.denied(t, "$JS.API.STREAM.INFO.KV_"+bus.BucketPKI)
}

func TestGenerateTLS_KeepsItsFilesAndRenewsAMissingServerCertificateFromTheSameCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	f, err := natsauth.GenerateTLS(dir, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, name := range []string{natsauth.TLSCAKey, natsauth.TLSKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", name, err, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
	}
	ca, crt := read(natsauth.TLSCAFile), read(natsauth.TLSCertFile)
	if _, err := natsauth.GenerateTLS(dir, "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(natsauth.TLSCAFile), ca) || !bytes.Equal(read(natsauth.TLSCertFile), crt) {
		t.Fatal("a second run changed the CA or the server certificate")
	}
	// Another host: a new server certificate, same CA.
	if _, err := natsauth.GenerateTLS(dir, "127.0.0.1", "nats.example"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(natsauth.TLSCAFile), ca) || bytes.Equal(read(natsauth.TLSCertFile), crt) {
		t.Fatal("a new host did not renew the server certificate from the same CA")
	}
	if err := os.Remove(filepath.Join(dir, natsauth.TLSCertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.GenerateTLS(dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.ParseCertificate(read(natsauth.TLSCertFile))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := certs.ParseCertificate(ca)
	if err := leaf.CheckSignatureFrom(root); err != nil {
		t.Fatalf("renewed server certificate not signed by the CA: %v", err)
	}
	if _, err := (natsauth.TLS{CAFile: f.CAFile(), CertFile: filepath.Join(dir, natsauth.TLSCertFile)}).Options(); !errors.Is(err, natsauth.ErrTLSPair) {
		t.Errorf("certificate without a key: %v, want ErrTLSPair", err)
	}
	if _, err := (natsauth.TLS{CAFile: filepath.Join(dir, "missing.crt")}).Options(); err == nil {
		t.Error("a missing CA file is accepted")
	}
}

func TestEmbedded_ReloadTLS_ServesARotatedCertificateWithoutARestart(t *testing.T) {
	f := tlsDir(t)
	env := testenv.NATSWith(t, testenv.NATSOptions{TLS: f.Server(), ClientTLS: f.Client()})
	serial := func(nc *nats.Conn) string {
		t.Helper()
		st, err := nc.TLSConnectionState()
		if err != nil {
			t.Fatal(err)
		}
		return st.PeerCertificates[0].SerialNumber.String()
	}
	before := serial(env.Conn)
	if err := os.Remove(filepath.Join(f.Dir, natsauth.TLSCertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.GenerateTLS(f.Dir, "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	if err := env.Server.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	nc, _ := env.ConnectAs(t, natsauth.Admin)
	if after := serial(nc); after == before {
		t.Fatalf("a new connection still gets certificate %s", before)
	}
	// The connection made before the rotation still works.
	if err := env.Conn.Flush(); err != nil {
		t.Fatalf("the connection made before the rotation broke: %v", err)
	}
}
