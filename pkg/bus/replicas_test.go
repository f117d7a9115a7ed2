package bus_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// natsCluster starts n in-process NATS servers with JetStream, routed into one cluster on
// loopback, and returns them once JetStream has a meta leader.
func natsCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	return natsClusterWith(t, n, "127.0.0.1", nil)
}

// natsClusterWith is natsCluster with the routes dialled by routeHost and each server's
// options changed by opt (when not nil) before it starts.
func natsClusterWith(t *testing.T, n int, routeHost string, opt func(*server.Options)) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort(routeHost, strconv.Itoa(p))})
	}
	servers := make([]*server.Server, n)
	for i := range servers {
		o := &server.Options{
			ServerName: fmt.Sprintf("nats-%d", i), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "hostplane", Host: "127.0.0.1", Port: ports[i]},
			Routes:  routes,
		}
		if opt != nil {
			opt(o)
		}
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Shutdown)
		servers[i] = s
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		for _, s := range servers {
			if !s.ReadyForConnections(10*time.Millisecond) || s.JetStreamIsClustered() && !s.JetStreamIsCurrent() {
				return false
			}
		}
		return servers[0].JetStreamIsLeader() || servers[1].JetStreamIsLeader() || servers[2].JetStreamIsLeader()
	}, "the NATS cluster never elected a JetStream meta leader")
	return servers
}

// clusterJS connects to every server of a cluster (reconnecting to another when one goes) and
// returns JetStream over it; the connection closes when the test ends.
func clusterJS(t *testing.T, servers []*server.Server) jetstream.JetStream {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestEnsureReplicated_ThreeCopiesOnAClusterSurviveAServerLoss(t *testing.T) {
	servers := natsCluster(t, 3)
	js := clusterJS(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := bus.EnsureStreamsReplicated(ctx, js, 3); err != nil {
		t.Fatal(err)
	}
	kv, err := bus.EnsureBucketReplicated(ctx, js, bus.BucketClusters, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{events.EventsStream, events.InboxStream, "KV_" + bus.BucketClusters} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("%s: %d replicas configured, cluster %+v; want 3 copies", name, info.Config.Replicas, info.Cluster)
		}
	}
	if _, err := kv.Put(ctx, "demo", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	t.Logf("streams and bucket with 3 replicas in %s", time.Since(start).Round(time.Millisecond))

	// One server goes; what was written is still there and writes go on.
	servers[0].Shutdown()
	var got jetstream.KeyValueEntry
	var lastErr error
	testenv.Eventually(t, 30*time.Second, func() bool {
		opCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, lastErr = kv.Put(opCtx, "after", []byte(`{"v":2}`)); lastErr != nil {
			return false
		}
		got, lastErr = kv.Get(opCtx, "demo")
		return lastErr == nil
	}, "the bucket never served again after a server went: %v", &lastErr)
	if string(got.Value()) != `{"v":1}` {
		t.Fatalf("demo = %s after a server loss", got.Value())
	}
}

// A key written through any server of the cluster reads back at once through that server,
// whichever replica it holds: reads of a replicated bucket go to the stream's leader, never
// to a follower's direct get (in-process servers apply writes too fast to show a stale
// follower; deploy/compose's three servers did: a node pool created and read back at once
// was "not found", and the compose smoke test failed with 500).
func TestEnsureReplicated_AKeyReadsBackAtOnceThroughEveryServer(t *testing.T) {
	servers := natsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := clusterJS(t, servers)
	if _, err := bus.EnsureBucketReplicated(ctx, all, bus.BucketClusters, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureObjectStore(ctx, all, bus.ObjectStoreSnapshots, 3); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KV_" + bus.BucketClusters, "OBJ_" + bus.ObjectStoreSnapshots} {
		st, err := all.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().Config.AllowDirect {
			t.Errorf("%s answers direct gets from any replica; want reads through its leader", name)
		}
	}
	for i, srv := range servers {
		// A client of this server alone, as a daemon connected to it is.
		js := clusterJS(t, []*server.Server{srv})
		kv, err := bus.EnsureBucketReplicated(ctx, js, bus.BucketClusters, 3)
		if err != nil {
			t.Fatal(err)
		}
		for n := range 100 {
			key := fmt.Sprintf("s%d-k%d", i, n)
			if _, err := kv.Create(ctx, key, []byte("v")); err != nil {
				t.Fatalf("create %s: %v", key, err)
			}
			if _, err := kv.Get(ctx, key); err != nil {
				t.Fatalf("get %s through server %d right after its create: %v", key, i, err)
			}
		}
	}
}

func TestEnsureReplicated_OnOneServer_SaysWhatToCheck(t *testing.T) {
	env := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := bus.EnsureBucketReplicated(ctx, env.JS, "replicated", 3)
	if err == nil || !strings.Contains(err.Error(), "HOSTPLANE_NATS_REPLICAS=3 needs a NATS cluster") {
		t.Fatalf("err = %v, want one naming HOSTPLANE_NATS_REPLICAS", err)
	}
}
