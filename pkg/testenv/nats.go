package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/natsauth"
)

// NATSEnv is an embedded NATS JetStream server for one test, with hostplane's streams and
// buckets, that accepts only the identities of pkg/natsauth and enforces their permissions.
type NATSEnv struct {
	Server *bus.Embedded
	// Conn and JS are connected as natsauth.Admin: a test playing another part (a stand-in
	// daemon, an inspector) may do anything.
	Conn  *nats.Conn
	JS    jetstream.JetStream
	Dir   string                // the JetStream store dir
	Creds *natsauth.Credentials // every identity's seed (Creds.SeedFile(name))
	TLS   natsauth.TLS          // how clients use TLS (NATSOptions.ClientTLS)
	log   *natsauth.ServerLog
}

// NATSOptions change what NATSWith starts.
type NATSOptions struct {
	// Identities are more identities the server accepts (other systems).
	Identities []natsauth.Identity
	// AllowViolations is for a test that provokes permission violations on purpose: without
	// it, any violation fails the test at cleanup (a daemon needed a subject the natsauth
	// table does not give it).
	AllowViolations bool
	// Record traces every client's publications and subscriptions (Usage).
	Record bool
	// TLS, when set, makes the server accept TLS clients only; ClientTLS is then how the
	// layout, Conn and ConnectAs connect (NATSEnv.TLS).
	TLS       *bus.ServerTLS
	ClientTLS natsauth.TLS
}

// NATS starts an embedded nats-server with JetStream on a random port and a store dir in
// t.TempDir(), with nkey authentication and permissions from pkg/natsauth; lays out the
// shared streams and buckets as the bootstrap identity, as a deployment does; and connects
// as the admin identity. A permission violation by any client fails the test. Everything is
// closed at cleanup.
func NATS(t testing.TB) *NATSEnv { return NATSWith(t, NATSOptions{}) }

// NATSWith is NATS with options.
func NATSWith(t testing.TB, o NATSOptions) *NATSEnv {
	t.Helper()
	dir := t.TempDir()
	creds, err := natsauth.Generate(filepath.Join(t.TempDir(), "creds"), o.Identities...)
	if err != nil {
		t.Fatalf("testenv: nats credentials: %v", err)
	}
	log := natsauth.NewServerLog(creds)
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: dir, Users: creds.ServerNkeys(), Logger: log, Trace: o.Record, TLS: o.TLS})
	if err != nil {
		t.Fatalf("testenv: start nats: %v", err)
	}
	// Registered before the server's stop, so it runs after it: every client is gone.
	if !o.AllowViolations {
		t.Cleanup(func() {
			for _, v := range log.Violations() {
				t.Errorf("nats permission violation (the natsauth table lacks a subject this identity needs): %s", v)
			}
		})
	}
	t.Cleanup(srv.Stop)
	env := &NATSEnv{Server: srv, Dir: dir, Creds: creds, TLS: o.ClientTLS, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bnc, bjs := env.ConnectAs(t, natsauth.Bootstrap)
	if err := natsauth.EnsureLayout(ctx, bjs, 1); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	bnc.Close()
	env.Conn, env.JS = env.ConnectAs(t, natsauth.Admin)
	return env
}

// ConnectAs opens another client connection (another "process") as identity name, closed
// at cleanup.
func (e *NATSEnv) ConnectAs(t testing.TB, name string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts, err := natsauth.ClientOptions(name, e.Creds.SeedFile(name), e.TLS)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return Connect(t, e.Server.URL(), append(opts, nats.Name(name))...)
}

// SeedFile is the seed file of identity name, for daemon.Base.NATSNKeyFile.
func (e *NATSEnv) SeedFile(name string) string { return e.Creds.SeedFile(name) }

// Violations are the permission violations the server logged so far, each naming the
// identity.
func (e *NATSEnv) Violations() []string { return e.log.Violations() }

// Usage is what each identity published and subscribed to, by subject (with Record).
func (e *NATSEnv) Usage() map[string]natsauth.Usage { return e.log.Usage() }

// Connect opens a client connection to url with opts, closed at cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("testenv: connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	return nc, js
}

// RequirePlainTextRefused fails the test unless the NATS server at url refuses a client that
// speaks its protocol in plain text: the server's INFO must require TLS, and CONNECT, PING
// and a PUB sent without TLS must get the connection closed, never a PONG.
func RequirePlainTextRefused(t testing.TB, url string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("the server's INFO %q (%v) does not require TLS", info, err)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\nPUB hostplane.in.demo.x 1\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := r.ReadString('\n')
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatal("the server neither answered nor closed a plain-text connection")
	case err == nil || strings.Contains(rest, "PONG"):
		t.Fatalf("a plain-text client got %q (%v), want the connection closed", rest, err)
	}
}

// RequirePlainTextRouteRefused fails the test unless the NATS cluster (route) port at addr
// (host:port) refuses a peer that speaks plain text: a member whose routes require TLS starts
// with the TLS handshake, so a route CONNECT and PING in plain text get the connection closed,
// never an INFO (what a plain-text route port sends first) or a PONG.
func RequirePlainTextRouteRefused(t testing.TB, addr string) {
	t.Helper()
	if got, err := RouteAttempt(t, addr, nil); err == nil || strings.Contains(got, "INFO") || strings.Contains(got, "PONG") {
		t.Fatalf("a plain-text route got %q (%v), want the connection closed", got, err)
	}
}

// RouteAttempt opens a route connection to addr as a peer member would, over TLS with cfg
// (in plain text when cfg is nil), and sends a CONNECT and a PING; it returns the first line
// the member answered, and the error that ended the attempt (a refused handshake, or the
// connection closed).
func RouteAttempt(t testing.TB, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if cfg != nil {
		tc := tls.Client(conn, cfg)
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		conn = tc
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false,\"name\":\"impostor\"}\r\nPING\r\n")); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the route port neither answered nor closed the connection")
	}
	return got, err
}

// Eventually polls cond every 20ms until it holds or timeout passes, then fails the test
// with msg. It is how tests wait: never a bare sleep.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("condition not met within %v: "+msg, append([]any{timeout}, args...)...)
	}
}
