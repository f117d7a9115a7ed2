package natsauth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/natsauth"
)

// standalone runs a nats-server from a configuration file that includes the generated
// auth.conf, as docker compose and Kubernetes run it; Reload re-reads the file as SIGHUP does.
func standalone(t *testing.T, dir string) *server.Server {
	t.Helper()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\ninclude "+natsauth.ServerConfigFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return srv
}

// connectSeed connects with the seed in file as identity name; errs gets the server's
// asynchronous errors, closed is closed when the connection is.
func connectSeed(srv *server.Server, name, file string) (nc *nats.Conn, errs chan error, closed chan struct{}, err error) {
	opts, err := natsauth.ClientOptions(name, file, natsauth.TLS{})
	if err != nil {
		return nil, nil, nil, err
	}
	errs, closed = make(chan error, 16), make(chan struct{})
	opts = append(opts, nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	nc, err = nats.Connect(srv.ClientURL(), opts...)
	return nc, errs, closed, err
}

func TestMint_InboxPublisher_IsAcceptedAfterAReloadConfinedToItsClustersAndRefusedOnceRevoked(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsauth.Generate(dir); err != nil {
		t.Fatal(err)
	}
	srv := standalone(t, dir)

	c, err := natsauth.Mint(dir, natsauth.Minted{Name: "ingest", Kind: natsauth.KindInboxPublisher, Clusters: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	seed := c.SeedFile("ingest")
	if fi, err := os.Stat(seed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed %s: %v %v, want mode 0600", seed, fi, err)
	}
	kept, _ := os.ReadFile(seed)
	keptFile := filepath.Join(t.TempDir(), "kept.nk")
	if err := os.WriteFile(keptFile, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	// Until the server reloads its configuration, it does not know the identity.
	if _, _, _, err := connectSeed(srv, "ingest", seed); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("before the reload: %v, want an authorization error", err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	nc, errs, closed, err := connectSeed(srv, "ingest", seed)
	if err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	defer nc.Close()
	for _, subject := range []string{"hostplane.in.other.node.ready", "hostplane.evt.demo.cluster.updated", "$KV.pki.demo", "$JS.API.STREAM.DELETE.HOSTPLANE_INBOX"} {
		_ = nc.Publish(subject, []byte("{}"))
		_ = nc.Flush()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
				t.Fatalf("publish to %s: %v, want a permission violation", subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the inbox publisher for demo published to %s", subject)
		}
	}
	// Its own cluster's inbound event is allowed: the server answers errors in order, so the
	// next error is the one about the refused publish that follows it, not this one.
	_ = nc.Publish("hostplane.in.demo.node.ready", []byte("{}"))
	_ = nc.Publish("hostplane.in.other.node.ready", []byte("{}"))
	_ = nc.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "hostplane.in.other.node.ready") {
			t.Fatalf("publishing its own cluster's inbound event: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refused publish after it was not reported")
	}

	minted, err := natsauth.ListMinted(dir)
	if err != nil || len(minted) != 1 || minted[0].Name != "ingest" || minted[0].Kind != natsauth.KindInboxPublisher || minted[0].Created.IsZero() {
		t.Fatalf("ListMinted = %+v, %v", minted, err)
	}

	if _, err := natsauth.Revoke(dir, "ingest"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(seed); !os.IsNotExist(err) {
		t.Errorf("the revoked identity's seed is still there: %v", err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked identity's open connection was not closed by the reload")
	}
	if _, _, _, err := connectSeed(srv, "ingest", keptFile); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connecting with the revoked seed: %v, want an authorization error", err)
	}
	// The daemons' identities are untouched by it.
	if nc, _, _, err := connectSeed(srv, "pkid", filepath.Join(dir, "pkid"+natsauth.SeedExt)); err != nil {
		t.Fatalf("pkid after the revocation: %v", err)
	} else {
		nc.Close()
	}
}

func TestMint_EventConsumer_IsKeptAcrossGenerateWithTheEventConsumersPermissions(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsauth.Mint(dir, natsauth.Minted{Name: "audit-sink", Kind: natsauth.KindEventConsumer}); err != nil {
		t.Fatal(err)
	}
	// A restart of hostplane dev (or `credentials init`) keeps the minted identity and its seed.
	seed1, _ := os.ReadFile(filepath.Join(dir, "audit-sink"+natsauth.SeedExt))
	c, err := natsauth.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed2, _ := os.ReadFile(c.SeedFile("audit-sink"))
	if len(seed1) == 0 || string(seed1) != string(seed2) || c.PublicKey("audit-sink") == "" {
		t.Fatal("Generate lost or changed the minted identity's seed")
	}
	id, ok := c.Identity("audit-sink")
	if !ok {
		t.Fatal("Generate dropped the minted identity")
	}
	want := natsauth.EventConsumer("audit-sink")
	if strings.Join(id.Permissions.Publish.Allow, " ") != strings.Join(want.Permissions.Publish.Allow, " ") {
		t.Fatalf("minted event consumer may publish %v, want %v", id.Permissions.Publish.Allow, want.Permissions.Publish.Allow)
	}
}

func TestMintAndRevoke_RefuseWhatCannotBeDone(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsauth.Mint(dir, natsauth.Minted{Name: "ingest", Kind: natsauth.KindInboxPublisher}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    natsauth.Minted
		want error
	}{
		{"same name twice", natsauth.Minted{Name: "ingest", Kind: natsauth.KindEventConsumer}, natsauth.ErrIdentityExists},
		{"a daemon's name", natsauth.Minted{Name: "pkid", Kind: natsauth.KindInboxPublisher}, natsauth.ErrIdentityExists},
		{"the admin's name", natsauth.Minted{Name: natsauth.Admin, Kind: natsauth.KindInboxPublisher}, natsauth.ErrIdentityExists},
		// An event consumer's durable is named after it: these would be infrad's and
		// clusterd's own durable consumers (or names a daemon may use next).
		{"a daemon's durable", natsauth.Minted{Name: "infrad-localcluster", Kind: natsauth.KindEventConsumer}, natsauth.ErrIdentityExists},
		{"a daemon's inbox durable", natsauth.Minted{Name: "clusterd-inbox", Kind: natsauth.KindEventConsumer}, natsauth.ErrIdentityExists},
		{"a daemon's prefix", natsauth.Minted{Name: "nodepoold_audit", Kind: natsauth.KindInboxPublisher}, natsauth.ErrIdentityExists},
		{"unknown kind", natsauth.Minted{Name: "x", Kind: "superuser"}, natsauth.ErrBadIdentity},
		{"consumer with clusters", natsauth.Minted{Name: "x", Kind: natsauth.KindEventConsumer, Clusters: []string{"demo"}}, natsauth.ErrBadIdentity},
		{"bad cluster name", natsauth.Minted{Name: "x", Kind: natsauth.KindInboxPublisher, Clusters: []string{"demo.>"}}, natsauth.ErrBadIdentity},
		{"name with a wildcard", natsauth.Minted{Name: "a.*", Kind: natsauth.KindInboxPublisher}, natsauth.ErrBadName},
	} {
		if _, err := natsauth.Mint(dir, tc.m); !errors.Is(err, tc.want) {
			t.Errorf("%s: Mint = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := natsauth.Revoke(dir, "pkid"); !errors.Is(err, natsauth.ErrBadIdentity) {
		t.Errorf("revoking a daemon: %v, want ErrBadIdentity", err)
	}
	if _, err := natsauth.Revoke(dir, "nobody"); !errors.Is(err, natsauth.ErrUnknownIdentity) {
		t.Errorf("revoking an unknown identity: %v, want ErrUnknownIdentity", err)
	}
	if m, _ := natsauth.ListMinted(dir); len(m) != 1 {
		t.Errorf("refused calls changed the minted list: %+v", m)
	}
}
