package nodepoold

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// env is a running nodepoold on an embedded NATS with its routes on a real HTTP server, and
// write access to the buckets of the daemons it reads (the stand-ins for clusterd and
// ignitiond). With a management cluster, Cluster API runs in-process in nodepoold.
type env struct {
	t        *testing.T
	nats     *testenv.NATSEnv
	d        *Daemon
	url      string
	mgmt     *localkube.Cluster
	clusters *store.Store[api.Cluster]
	ignition *store.Store[api.IgnitionTokens]
	pools    *store.Store[api.NodePool]

	mu        sync.Mutex
	events    []events.Event // nodepool events and rejections, in arrival order
	published int            // inbound events sent
}

type envOption func(*Config)

func start(t *testing.T, mgmt *localkube.Cluster, opts ...envOption) *env {
	t.Helper()
	n := testenv.NATS(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := Config{
		Base:            daemon.Base{NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(Name), DataDir: t.TempDir(), Logger: log, Registry: prometheus.NewRegistry()},
		ProgressRequeue: 300 * time.Millisecond,
	}
	if mgmt != nil {
		cfg.ManagementKubeconfig = mgmt.KubeconfigPath
	}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nats: n, d: d, mgmt: mgmt}
	e.subscribe("hostplane.evt.*.nodepool.>", "hostplane.evt.*.inbox.rejected")
	testenv.Run(t, "nodepoold Run", d.Run)
	testenv.Eventually(t, 2*time.Minute, func() bool { return d.Ready(context.Background()) == nil }, "nodepoold ready")

	router := httpapi.NewRouter(httpapi.Config{Name: "test", Logger: log})
	d.Routes(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.clusters = store.New[api.Cluster](e.bucket(bus.BucketClusters))
	e.ignition = store.New[api.IgnitionTokens](e.bucket(bus.BucketIgnition))
	e.pools = store.New[api.NodePool](e.bucket(bus.BucketNodePools))
	return e
}

func (e *env) bucket(name string) jetstream.KeyValue {
	e.t.Helper()
	kv, err := bus.EnsureBucket(context.Background(), e.nats.JS, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return kv
}

// subscribe records the events published on subjects.
func (e *env) subscribe(subjects ...string) {
	for _, s := range subjects {
		sub, err := e.nats.Conn.Subscribe(s, func(m *nats.Msg) {
			ev, err := events.Decode(m.Data)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := e.nats.Conn.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// seen reports whether an event of type typ ("io.hostplane.nodepool.created") with key was
// published.
func (e *env) seen(typ, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events {
		if ev.Type == typ && ev.Subject == key {
			return true
		}
	}
	return false
}

// rejection returns the reason of the inbox.rejected answer to inbound event id ("" while none).
func (e *env) rejection(id string) (reason, source string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events {
		if ev.Type != "io.hostplane.inbox.rejected" {
			continue
		}
		var r struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		}
		if ev.DecodeData(&r) == nil && r.ID == id {
			return r.Reason, ev.Source
		}
	}
	return "", ""
}

// putCluster stores a cluster record as clusterd would.
func (e *env) putCluster(name, release string) {
	e.t.Helper()
	c := api.Cluster{Spec: api.ClusterSpec{Release: api.Release{Version: release}}}
	c.Name = name
	c.Spec.Default()
	if _, err := e.clusters.Create(context.Background(), name, &c); err != nil {
		e.t.Fatal(err)
	}
}

// deleteCluster marks a cluster record deleted as clusterd would.
func (e *env) deleteCluster(name string) {
	e.t.Helper()
	now := time.Now().UTC()
	if _, _, err := e.clusters.Mutate(context.Background(), name, false, func(c *api.Cluster) error {
		c.DeletionTimestamp = &now
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// do sends a request and returns the status and body.
func (e *env) do(method, path, body string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// createPool POSTs a pool and fails the test unless it is accepted.
func (e *env) createPool(cluster, body string) api.NodePool {
	e.t.Helper()
	status, b := e.do(http.MethodPost, "/v1/clusters/"+cluster+"/nodepools", body)
	if status != http.StatusAccepted {
		e.t.Fatalf("create pool: %d %s", status, b)
	}
	var np api.NodePool
	decode(e.t, b, &np)
	return np
}

// patchPool PATCHes a pool and fails the test unless it answers 200.
func (e *env) patchPool(cluster, pool, body string) api.NodePool {
	e.t.Helper()
	status, b := e.do(http.MethodPatch, "/v1/clusters/"+cluster+"/nodepools/"+pool, body)
	if status != http.StatusOK {
		e.t.Fatalf("patch pool: %d %s", status, b)
	}
	var np api.NodePool
	decode(e.t, b, &np)
	return np
}

// getPool returns the pool through the API, or nil on 404.
func (e *env) getPool(cluster, pool string) *api.NodePool {
	e.t.Helper()
	status, b := e.do(http.MethodGet, "/v1/clusters/"+cluster+"/nodepools/"+pool, "")
	switch status {
	case http.StatusNotFound:
		return nil
	case http.StatusOK:
	default:
		e.t.Fatalf("get pool: %d %s", status, b)
	}
	var np api.NodePool
	decode(e.t, b, &np)
	return &np
}

// putIgnition stores the pool's token record as ignitiond would: ready for hash, with a stub
// as userdata.
func (e *env) putIgnition(cluster, pool, hash, token string) {
	e.t.Helper()
	key := api.NodePoolKey(cluster, pool)
	rec := api.IgnitionTokens{Cluster: cluster, NodePool: pool, Ready: true,
		Current:  api.IgnitionToken{Token: token, ConfigHash: hash, IssuedAt: time.Now().UTC()},
		UserData: []byte(`{"ignition":{"version":"3.5.0","config":{"merge":[{"source":"https://127.0.0.1:1/ignition","httpHeaders":[{"name":"Authorization","value":"Bearer ` + token + `"}]}]}}}`),
	}
	rec.Name = key
	ctx := context.Background()
	if _, rev, err := e.ignition.Get(ctx, key); err == nil {
		if _, err := e.ignition.Update(ctx, key, &rec, rev); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if _, err := e.ignition.Create(ctx, key, &rec); err != nil {
		e.t.Fatal(err)
	}
	if _, err := bus.NewPublisher(e.nats.JS, "ignitiond").Publish(ctx, cluster, events.ResourceIgnition, events.VerbIgnitionReady, cluster+"/"+pool, nil); err != nil {
		e.t.Fatal(err)
	}
}

// problemFields returns the field names of a problem+json body.
func problemFields(t *testing.T, b []byte) []string {
	t.Helper()
	var p httpapi.Problem
	decode(t, b, &p)
	var out []string
	for _, f := range p.Errors {
		out = append(out, f.Field)
	}
	return out
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, b)
	}
}

// poolBody is a pool's POST body with the spec members given (JSON fragments).
func poolBody(name string, spec ...string) string {
	return `{"name":"` + name + `","spec":{` + strings.Join(spec, ",") + `}}`
}
