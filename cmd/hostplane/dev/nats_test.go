package dev_test

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

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// TestDev_NATS_RequiresTLSWithTheDataDirsCA_AndReloadsARotatedCertificate: hostplane dev's
// NATS accepts TLS clients only; its CA and server certificate are made once under
// <data dir>/nats-tls (keys 0600) and kept across restarts; the daemons connect with that CA
// (they answer through NATS); a client trusting no CA or speaking plain text is refused; a
// server certificate replaced in place is served to new connections within seconds.
func TestDev_NATS_RequiresTLSWithTheDataDirsCA_AndReloadsARotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	start := func() *dev.Stack { return startConfig(t, dev.Config{DataDir: dir, NoManagementAPIServer: true}) }
	s := start()
	tlsDir := filepath.Join(dir, dev.NATSTLSDir)
	if s.NATSTLS.Dir != tlsDir {
		t.Errorf("TLS files in %s, want %s", s.NATSTLS.Dir, tlsDir)
	}
	for _, name := range []string{natsauth.TLSCAKey, natsauth.TLSKeyFile} {
		if fi, err := os.Stat(filepath.Join(tlsDir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", name, err)
		}
	}
	if !strings.HasPrefix(s.NATS.URL(), "tls://") {
		t.Errorf("NATS URL %s, want tls://", s.NATS.URL())
	}
	testenv.RequirePlainTextRefused(t, s.NATS.URL())
	opts, err := natsauth.ClientOptions(natsauth.Admin, s.NATSCreds.SeedFile(natsauth.Admin), natsauth.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(s.NATS.URL(), append(opts, nats.NoReconnect())...); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the data dir's CA connected")
	} else if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Fatalf("a client without the CA: %v, want a certificate verification error", err)
	}

	// The daemons are connected over TLS: clusterd answers from its KV bucket.
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, _ := send(t, "GET", s.URL()+"/v1/clusters", s.AdminToken())
		return resp.StatusCode == 200
	}, "clusterd never answered /v1/clusters")

	serial := func() string {
		nc, err := s.ConnectNATS(t.Context(), natsauth.Admin)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		st, err := nc.TLSConnectionState()
		if err != nil {
			t.Fatalf("admin's connection: %v", err)
		}
		return st.PeerCertificates[0].SerialNumber.String()
	}
	// Rotation without a restart: a new server certificate from the same CA.
	before := serial()
	if err := os.Remove(filepath.Join(tlsDir, natsauth.TLSCertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.GenerateTLS(tlsDir, "127.0.0.1", "localhost"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return serial() != before },
		"new connections still get the old server certificate")

	ca, _ := os.ReadFile(s.NATSTLS.CAFile())
	s.Stop(context.Background())
	s = start()
	defer s.Stop(context.Background())
	if now, _ := os.ReadFile(s.NATSTLS.CAFile()); !bytes.Equal(now, ca) {
		t.Error("a restart made a new CA")
	}
	nc, err := s.ConnectNATS(t.Context(), natsauth.Admin)
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	nc.Close()
}
