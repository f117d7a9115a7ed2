package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
	for _, want := range []string{seed, "hostplane.in.demo.", "--inbox-prefix _INBOX_ingest"} {
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
		opts, err := natsauth.ClientOptions("ingest", file)
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
