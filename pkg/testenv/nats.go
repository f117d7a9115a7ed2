package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
)

// NATSEnv is an embedded NATS JetStream server for one test, with hostplane's streams.
type NATSEnv struct {
	Server *bus.Embedded
	Conn   *nats.Conn
	JS     jetstream.JetStream
	Dir    string // the JetStream store dir
}

// NATS starts an embedded nats-server with JetStream on a random port and a store dir in
// t.TempDir(), creates hostplane's streams and connects. Everything is closed at cleanup.
func NATS(t testing.TB) *NATSEnv {
	t.Helper()
	dir := t.TempDir()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatalf("testenv: start nats: %v", err)
	}
	t.Cleanup(srv.Stop)
	env := &NATSEnv{Server: srv, Dir: dir}
	env.Conn, env.JS = Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.EnsureStreams(ctx, env.JS); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return env
}

// Connect opens another client connection (another "process") to url, closed at cleanup.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
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

// Eventually polls cond every 20ms until it holds or timeout passes, then fails the test
// with msg. It is how tests wait: never a bare sleep.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
