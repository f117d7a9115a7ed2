package bus_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// routeTLS generates a NATS CA and a route certificate for localhost in a new directory, as
// `hostplane credentials init --tls-route-host` does.
func routeTLS(t *testing.T) *natsauth.TLSFiles {
	t.Helper()
	f, err := natsauth.GenerateRouteTLS(filepath.Join(t.TempDir(), "tls"), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// clusterTLSConfig is the cluster block's tls of deploy/k8s's nats.conf (cert_file, key_file,
// ca_file), built as nats-server builds it from a configuration file: routes are mutual TLS,
// each member verifying its peer against the CA both ways.
func clusterTLSConfig(t *testing.T, f *natsauth.TLSFiles) *tls.Config {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: filepath.Join(f.Dir, natsauth.TLSRouteCertFile),
		KeyFile:  filepath.Join(f.Dir, natsauth.TLSRouteKeyFile),
		CaFile:   f.CAFile(),
		Verify:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.RootCAs = tc.ClientCAs
	return tc
}

// TestRouteTLS_ThreeServers_ReplicateOverMutualTLS_RefusePlainTextAndForeignRoutes: three
// nats-servers whose routes require mutual TLS with the route certificate GenerateRouteTLS
// makes (dialled by name, as deploy/k8s's members dial nats-<n>.nats-headless) form a
// JetStream cluster that keeps three copies of every stream and bucket; a route that speaks
// plain text, or presents a certificate from another CA, is refused.
func TestRouteTLS_ThreeServers_ReplicateOverMutualTLS_RefusePlainTextAndForeignRoutes(t *testing.T) {
	f := routeTLS(t)
	servers := natsClusterWith(t, 3, "localhost", func(o *server.Options) {
		o.Cluster.TLSConfig = clusterTLSConfig(t, f)
		o.Cluster.TLSTimeout = 5
	})

	// JetStream with three replicas across the TLS routes.
	js := clusterJS(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.EnsureStreamsReplicated(ctx, js, 3); err != nil {
		t.Fatal(err)
	}
	kv, err := bus.EnsureBucketReplicated(ctx, js, bus.BucketClusters, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "demo", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "hostplane.evt.demo.cluster.updated", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{events.EventsStream, events.InboxStream, "KV_" + bus.BucketClusters} {
		var info *jetstream.StreamInfo
		testenv.Eventually(t, 30*time.Second, func() bool {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return false
			}
			if info, err = s.Info(ctx); err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
				return false
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current {
					return false
				}
			}
			return true
		}, "%s never had three current copies over the TLS routes: %+v", name, &info)
	}
	got, err := kv.Get(ctx, "demo")
	if err != nil || string(got.Value()) != `{"v":1}` {
		t.Fatalf("demo = %v (%v) over the TLS routes", got, err)
	}

	// A route in plain text: a member starts route connections with the TLS handshake, so a
	// peer's CONNECT and PING in plain text get the connection closed, never an INFO or PONG.
	routeAddr := servers[0].ClusterAddr().String()
	testenv.RequirePlainTextRouteRefused(t, routeAddr)

	// Over TLS, trusting the member: with the members' route certificate the member answers
	// (its INFO); with another CA's route certificate it refuses the handshake.
	caPEM, err := os.ReadFile(f.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	peer := func(files *natsauth.TLSFiles) *tls.Config {
		crt, err := tls.LoadX509KeyPair(filepath.Join(files.Dir, natsauth.TLSRouteCertFile), filepath.Join(files.Dir, natsauth.TLSRouteKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{ServerName: "localhost", RootCAs: roots, Certificates: []tls.Certificate{crt}, MinVersion: tls.VersionTLS12}
	}
	if got, err := testenv.RouteAttempt(t, routeAddr, peer(f)); err != nil || !strings.HasPrefix(got, "INFO ") {
		t.Fatalf("a route with the members' certificate got %q (%v), want the member's INFO", got, err)
	}
	_, err = testenv.RouteAttempt(t, routeAddr, peer(routeTLS(t)))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a route with another CA's certificate: %v, want refused for its certificate", err)
	}
	t.Logf("a route with another CA's certificate: refused: %v", err)
	// Only the members are routed to each other.
	for _, s := range servers {
		rz, err := s.Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteName != "nats-0" && r.RemoteName != "nats-1" && r.RemoteName != "nats-2" {
				t.Errorf("%s has a route to %q", s.Name(), r.RemoteName)
			}
		}
	}
}
