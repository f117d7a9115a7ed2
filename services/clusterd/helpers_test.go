package clusterd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// env is a running clusterd on an embedded NATS with its routes on a real HTTP server, plus
// write access to the buckets of the daemons it aggregates (the stand-ins for infrad, pkid
// and componentd).
type env struct {
	t          *testing.T
	nats       *testenv.NATSEnv
	d          *Daemon
	registry   *prometheus.Registry
	url        string
	seal       *certs.SealKey
	clusters   *store.Store[api.Cluster]
	infra      *store.Store[api.Infra]
	pki        *store.Store[api.ClusterPKI]
	components *store.Store[api.ControlPlaneComponent]
	pub        *bus.Publisher
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, "")
}

// startWith starts clusterd with the management cluster of kubeconfig file mgmt ("" none),
// its Config changed by opts.
func startWith(t *testing.T, mgmt string, opts ...func(*Config)) *env {
	t.Helper()
	n := testenv.NATS(t)
	dir := t.TempDir()
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(dir, "pki.key"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	cfg := Config{Base: daemon.Base{NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(Name), DataDir: dir, Logger: log, Registry: reg, ManagementKubeconfig: mgmt}}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, "clusterd Run", d.Run)
	testenv.Eventually(t, 30*time.Second, func() bool { return d.Ready(context.Background()) == nil }, "clusterd ready")

	router := httpapi.NewRouter(httpapi.Config{Name: "test", Logger: log})
	d.Routes(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)

	e := &env{t: t, nats: n, d: d, registry: reg, url: srv.URL, seal: seal, pub: bus.NewPublisher(n.JS, "standin")}
	e.clusters = store.New[api.Cluster](e.bucket(bus.BucketClusters))
	e.infra = store.New[api.Infra](e.bucket(bus.BucketInfra))
	e.pki = store.New[api.ClusterPKI](e.bucket(bus.BucketPKI))
	e.components = store.New[api.ControlPlaneComponent](e.bucket(bus.BucketControlPlane))
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

// do sends a request and returns the status and body.
func (e *env) do(method, path, contentType, body string) (int, http.Header, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
	return resp.StatusCode, resp.Header, b
}

func (e *env) create(name, version string) api.Cluster {
	e.t.Helper()
	status, _, body := e.do(http.MethodPost, "/v1/clusters", "application/json",
		`{"name":"`+name+`","spec":{"release":{"version":"`+version+`"},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`)
	if status != http.StatusAccepted {
		e.t.Fatalf("create %s: %d %s", name, status, body)
	}
	var c api.Cluster
	decode(e.t, body, &c)
	return c
}

// get returns the cluster through the API, or nil on 404.
func (e *env) get(name string) *api.Cluster {
	e.t.Helper()
	status, _, body := e.do(http.MethodGet, "/v1/clusters/"+name, "", "")
	switch status {
	case http.StatusNotFound:
		return nil
	case http.StatusOK:
	default:
		e.t.Fatalf("get %s: %d %s", name, status, body)
	}
	var c api.Cluster
	decode(e.t, body, &c)
	return &c
}

// condition returns the cluster's condition of type typ (zero if absent or the cluster is gone).
func (e *env) condition(name, typ string) api.Condition {
	e.t.Helper()
	c := e.get(name)
	if c == nil {
		return api.Condition{}
	}
	cond, _ := c.Status.Conditions.Get(typ)
	return cond
}

// waitCondition waits until the cluster's condition typ has status and a message containing msg.
func (e *env) waitCondition(name, typ string, status api.ConditionStatus, msg string) api.Condition {
	e.t.Helper()
	var cond api.Condition
	testenv.Eventually(e.t, 20*time.Second, func() bool {
		cond = e.condition(name, typ)
		return cond.Status == status && bytes.Contains([]byte(cond.Message), []byte(msg))
	}, "%s %s=%s with message containing %q; last %+v", name, typ, status, msg, &cond)
	return cond
}

func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

func problem(t *testing.T, body []byte) httpapi.Problem {
	t.Helper()
	var p httpapi.Problem
	decode(t, body, &p)
	return p
}

// The stand-ins: what infrad, pkid and componentd write and announce.

func (e *env) put(ctx context.Context, resource events.Resource, verb, cluster, key string, write func() error) {
	e.t.Helper()
	if err := write(); err != nil {
		e.t.Fatalf("write %s %s: %v", resource, key, err)
	}
	if _, err := e.pub.Publish(ctx, cluster, resource, verb, key, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) putInfra(cluster string, ready bool) {
	e.t.Helper()
	ctx := context.Background()
	v := &api.Infra{Platform: api.PlatformLocal, Endpoint: api.Endpoint{Host: "127.0.0.1", Port: 36443}, Ready: ready}
	v.Name = cluster
	e.put(ctx, events.ResourceInfra, "ready", cluster, cluster, func() error { return upsert(ctx, e.infra, cluster, v) })
}

func (e *env) putPKI(cluster string, kubeconfig []byte) {
	e.t.Helper()
	ctx := context.Background()
	v := &api.ClusterPKI{Serial: "1", Ready: true, Kubeconfigs: map[string][]byte{api.KubeconfigAdmin: e.seal.Seal(kubeconfig)}}
	v.Name = cluster
	e.put(ctx, events.ResourcePKI, "ready", cluster, cluster, func() error { return upsert(ctx, e.pki, cluster, v) })
}

// putComponent writes a component that runs version with ready of replicas ready; it is
// Available when ready > 0 and RolloutComplete when all replicas are ready.
func (e *env) putComponent(cluster, name, version string, ready, replicas int) {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now()
	v := &api.ControlPlaneComponent{Cluster: cluster, Spec: api.ControlPlaneComponentSpec{Version: version, Replicas: replicas}}
	v.Name = name
	v.Generation = 1
	v.Status.ObservedGeneration = 1
	v.Status.Version = version
	v.Status.ReadyReplicas = ready
	avail, rollout := api.ConditionFalse, api.ConditionFalse
	if ready > 0 {
		avail = api.ConditionTrue
	}
	if ready == replicas {
		rollout = api.ConditionTrue
	}
	v.Status.Conditions.Set(api.Condition{Type: api.ConditionAvailable, Status: avail, Reason: "Probed"}, now)
	v.Status.Conditions.Set(api.Condition{Type: api.ConditionRolloutComplete, Status: rollout, Reason: "Probed"}, now)
	key := cluster + "." + name
	e.put(ctx, events.ResourceComponent, "available", cluster, key, func() error { return upsert(ctx, e.components, key, v) })
}

func (e *env) putControlPlane(cluster, version string) {
	e.t.Helper()
	for _, name := range components {
		e.putComponent(cluster, name, version, 1, 1)
	}
}

func (e *env) remove(resource events.Resource, cluster, key string, s interface {
	Delete(context.Context, string, uint64) error
}) {
	e.t.Helper()
	ctx := context.Background()
	e.put(ctx, resource, "deleted", cluster, key, func() error { return s.Delete(ctx, key, 0) })
}

// upsert writes v under key whatever is there (the stand-ins own their buckets).
func upsert[T any](ctx context.Context, s *store.Store[T], key string, v *T) error {
	_, rev, err := s.Get(ctx, key)
	switch {
	case err == nil:
		_, err = s.Update(ctx, key, v, rev)
		return err
	case errors.Is(err, store.ErrNotFound):
		_, err = s.Create(ctx, key, v)
		return err
	}
	return err
}
