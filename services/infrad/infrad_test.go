package infrad_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/infrad/lb"
)

const wait = 30 * time.Second

// env is one test's NATS plus the stand-ins for clusterd and componentd: they write the
// clusters and controlplane buckets directly and publish the events those daemons would.
type env struct {
	t          *testing.T
	nats       *testenv.NATSEnv
	clusters   *store.Store[api.Cluster]
	components *store.Store[api.ControlPlaneComponent]
	infra      *store.Store[api.Infra]
	clusterd   *bus.Publisher
	componentd *bus.Publisher
}

func newEnv(t *testing.T) *env {
	t.Helper()
	n := testenv.NATS(t)
	ctx := t.Context()
	bucket := func(name string) jetstream.KeyValue {
		kv, err := bus.EnsureBucket(ctx, n.JS, name)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	return &env{
		t:          t,
		nats:       n,
		clusters:   store.New[api.Cluster](bucket(bus.BucketClusters)),
		components: store.New[api.ControlPlaneComponent](bucket(bus.BucketControlPlane)),
		infra:      store.New[api.Infra](bucket(bus.BucketInfra)),
		clusterd:   bus.NewPublisher(n.JS, "clusterd"),
		componentd: bus.NewPublisher(n.JS, "componentd"),
	}
}

// running is one infrad instance.
type running struct {
	d        *infrad.Daemon
	registry *prometheus.Registry
	url      string
	stop     func()
}

// start runs a new infrad instance against the env's NATS until stop (or the test's end);
// opts change its configuration.
func (e *env) start(opts ...func(*infrad.Config)) *running {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	cfg := infrad.Config{Base: daemon.Base{
		NATSURL:      e.nats.Server.URL(),
		NATSNKeyFile: e.nats.SeedFile(infrad.Name),
		DataDir:      e.t.TempDir(),
		AdminAddr:    "127.0.0.1:0",
		Logger:       slog.New(slog.NewTextHandler(newQuietWriter(e.t), &slog.HandlerOptions{Level: slog.LevelInfo})),
		Registry:     reg,
	}}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := infrad.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, stop := testenv.Run(e.t, "infrad run", d.Run)
	addrCtx, cancelAddr := context.WithTimeout(ctx, wait)
	defer cancelAddr()
	addr := d.AdminAddr(addrCtx)
	if addr == "" {
		e.t.Fatal("infrad did not listen on its admin address")
	}
	testenv.Eventually(e.t, wait, func() bool { return d.Ready(ctx) == nil }, "infrad ready")
	return &running{d: d, registry: reg, url: "http://" + addr, stop: stop}
}

// createCluster writes a live cluster as clusterd would and publishes cluster.created.
func (e *env) createCluster(name, policy, platform string) {
	e.t.Helper()
	c := &api.Cluster{
		ObjectMeta: api.ObjectMeta{Name: name},
		Spec: api.ClusterSpec{
			Release:                      api.Release{Version: "1.34.4"},
			Platform:                     api.Platform{Type: platform},
			ControllerAvailabilityPolicy: policy,
		},
	}
	if _, err := e.clusters.Create(e.t.Context(), name, c); err != nil {
		e.t.Fatal(err)
	}
	e.publishCluster(name, "created")
}

func (e *env) publishCluster(name, verb string) {
	e.t.Helper()
	if _, err := e.clusterd.Publish(e.t.Context(), name, events.ResourceCluster, verb, name, nil); err != nil {
		e.t.Fatal(err)
	}
}

// updateCluster changes the cluster's spec (a release upgrade), bumping its generation.
func (e *env) updateCluster(name, version string) int64 {
	e.t.Helper()
	c, _, err := e.clusters.Mutate(e.t.Context(), name, true, func(c *api.Cluster) error {
		c.Spec.Release.Version = version
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.publishCluster(name, "updated")
	return c.Generation
}

// readyInfra waits for the cluster's record to be ready and returns it.
func (e *env) readyInfra(name string, cond ...func(*api.Infra) bool) *api.Infra {
	e.t.Helper()
	var inf *api.Infra
	testenv.Eventually(e.t, wait, func() bool {
		v, _, err := e.infra.Get(e.t.Context(), name)
		if err != nil || !v.Ready {
			return false
		}
		for _, c := range cond {
			if !c(v) {
				return false
			}
		}
		inf = v
		return true
	}, "infra record of %s ready", name)
	return inf
}

// published reports whether an event was stored on hostplane.evt.<cluster>.infra.<verb>.
func (e *env) published(cluster, verb string) bool {
	s, err := e.nats.JS.Stream(e.t.Context(), events.EventsStream)
	if err != nil {
		return false
	}
	subject, _ := events.Subject(cluster, events.ResourceInfra, verb)
	_, err = s.GetLastMsgForSubject(e.t.Context(), subject)
	return err == nil
}

func ports(inf *api.Infra) []int {
	p := []int{inf.Endpoint.Port}
	for _, a := range inf.APIServers {
		p = append(p, a.Port)
	}
	for _, m := range inf.Etcd {
		p = append(p, m.ClientPort, m.PeerPort)
	}
	p = append(p, inf.ControllerManagerPorts...)
	return append(p, inf.SchedulerPorts...)
}

func addr(ep api.Endpoint) string { return net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)) }

func accepts(address string) bool {
	c, err := net.DialTimeout("tcp", address, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// backend is an HTTPS server standing in for one kube-apiserver replica: it answers name to
// every request, the balancer's /readyz probe included, so the balancer sees it ready (a
// balancer that wakes its cluster holds connections while no backend is).
func backend(t *testing.T, address, name string) *http.Server {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatalf("listen on the allocated apiserver port %s: %v", address, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name)
	}))
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Config
}

// client opens a new TCP connection per request, so every request goes through the
// load balancer's backend choice.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} //nolint:gosec // the test's own backends

func get(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestSingleReplica_AllocatesOnceAndKeepsItsPortsAcrossReconcilesAndRestarts(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	e.createCluster("solo", api.SingleReplica, api.PlatformLocal)

	inf := e.readyInfra("solo")
	if inf.Platform != api.PlatformLocal || inf.ClusterGeneration != 1 {
		t.Errorf("platform %q, cluster generation %d; want local, 1", inf.Platform, inf.ClusterGeneration)
	}
	if len(inf.Etcd) != 1 || len(inf.APIServers) != 1 || len(inf.ControllerManagerPorts) != 1 || len(inf.SchedulerPorts) != 1 {
		t.Fatalf("single replica got %d etcd, %d apiservers, %d kcm, %d scheduler ports; want one each",
			len(inf.Etcd), len(inf.APIServers), len(inf.ControllerManagerPorts), len(inf.SchedulerPorts))
	}
	// The endpoint is infrad's load balancer in front of the one apiserver (so it can wake a
	// hibernated cluster on a connection).
	if inf.Endpoint == inf.APIServers[0] || inf.Endpoint.Host != "127.0.0.1" {
		t.Errorf("endpoint %+v, want a load balancer port of its own on 127.0.0.1 (apiserver %+v)", inf.Endpoint, inf.APIServers[0])
	}
	if p := slices.Compact(slices.Sorted(slices.Values(ports(inf)))); len(p) != 6 || p[0] == 0 {
		t.Errorf("distinct ports %v, want 6 non-zero (endpoint, etcd client and peer, apiserver, kcm, scheduler)", p)
	}
	want := ports(inf)
	testenv.Eventually(t, wait, func() bool { return e.published("solo", infrad.VerbReady) }, "infra.ready published")

	// The HTTP API serves the record; an unknown cluster is a 404 problem.
	code, body, err := get(first.url + "/v1/clusters/solo/infra")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET infra: %d %v", code, err)
	}
	var served api.Infra
	if err := json.Unmarshal([]byte(body), &served); err != nil || !slices.Equal(ports(&served), want) {
		t.Errorf("GET infra served %s (%v), want ports %v", body, err, want)
	}
	resp, err := client.Get(first.url + "/v1/clusters/nope/infra")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET infra of an unknown cluster: %d %s, want a 404 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got, _ := metric(t, first.registry, infrad.MetricClusters, nil); got != 1 {
		t.Errorf("%s = %v, want 1", infrad.MetricClusters, got)
	}

	// A spec change reconciles again: the generation is recorded, the ports stay.
	gen := e.updateCluster("solo", "1.33.13")
	inf = e.readyInfra("solo", func(i *api.Infra) bool { return i.ClusterGeneration == gen })
	if got := ports(inf); !slices.Equal(got, want) {
		t.Errorf("after a reconcile ports are %v, want %v", got, want)
	}

	// A new infrad on the same NATS keeps them too.
	first.stop()
	e.start()
	gen = e.updateCluster("solo", "1.34.4")
	inf = e.readyInfra("solo", func(i *api.Infra) bool { return i.ClusterGeneration == gen })
	if got := ports(inf); !slices.Equal(got, want) {
		t.Errorf("after an infrad restart ports are %v, want %v", got, want)
	}
	if inf.Generation != 1 {
		t.Errorf("record generation %d, want 1: the allocation never changed", inf.Generation)
	}
}

func TestHighlyAvailable_LoadBalancesAcrossTwoAPIServersAndSurvivesAStoppedOne(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	e.createCluster("ha", api.HighlyAvailable, api.PlatformLocal)

	inf := e.readyInfra("ha")
	if len(inf.Etcd) != 3 || len(inf.APIServers) != 2 || len(inf.ControllerManagerPorts) != 2 || len(inf.SchedulerPorts) != 2 {
		t.Fatalf("highly available got %d etcd, %d apiservers, %d kcm, %d scheduler ports; want 3, 2, 2, 2",
			len(inf.Etcd), len(inf.APIServers), len(inf.ControllerManagerPorts), len(inf.SchedulerPorts))
	}
	if inf.Endpoint.Port == inf.APIServers[0].Port || inf.Endpoint.Port == inf.APIServers[1].Port {
		t.Fatalf("endpoint %+v is an apiserver's port; want the load balancer's own", inf.Endpoint)
	}
	if names := []string{inf.Etcd[0].Name, inf.Etcd[1].Name, inf.Etcd[2].Name}; !slices.Equal(names, []string{"etcd-0", "etcd-1", "etcd-2"}) {
		t.Errorf("etcd member names %v", names)
	}

	a := backend(t, addr(inf.APIServers[0]), "a")
	backend(t, addr(inf.APIServers[1]), "b")
	url := "https://" + addr(inf.Endpoint) + "/"

	// The daemons' internal listener reaches the same replicas.
	if inf.InternalEndpoint == nil || inf.InternalEndpoint.Port == inf.Endpoint.Port {
		t.Fatalf("internal endpoint %+v: want a port of its own", inf.InternalEndpoint)
	}
	if code, body, err := get("https://" + addr(*inf.InternalEndpoint) + "/"); err != nil || code != http.StatusOK || (body != "a" && body != "b") {
		t.Fatalf("request through the internal listener: %d %q %v", code, body, err)
	}

	// Every request succeeds, and round-robin reaches both replicas.
	seen := map[string]int{}
	testenv.Eventually(t, wait, func() bool {
		code, body, err := get(url)
		if err != nil || code != http.StatusOK {
			t.Fatalf("request through the load balancer: %d %v", code, err)
		}
		seen[body]++
		return seen["a"] > 0 && seen["b"] > 0
	}, "both backends answer through the load balancer (seen %v)", seen)

	// Stop one replica: no request fails.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		code, body, err := get(url)
		if err != nil || code != http.StatusOK || body != "b" {
			t.Fatalf("request %d after stopping backend a: %d %q %v", i, code, body, err)
		}
	}

	b := addr(inf.APIServers[1])
	if v, n := metric(t, d.registry, lb.MetricConnections, map[string]string{"cluster": "ha", "backend": b}); n != 2 || v < 40 {
		t.Errorf("%s has %d series and %v connections to %s; want one series per backend and at least 40", lb.MetricConnections, n, v, b)
	}
}

func TestRestart_ClosesTheLoadBalancerOnStopAndReopensItFromTheRecord(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	e.createCluster("ha", api.HighlyAvailable, api.PlatformLocal)
	inf := e.readyInfra("ha")
	backend(t, addr(inf.APIServers[0]), "a")
	backend(t, addr(inf.APIServers[1]), "b")
	url := "https://" + addr(inf.Endpoint) + "/"
	if code, _, err := get(url); err != nil || code != http.StatusOK {
		t.Fatalf("request through the load balancer: %d %v", code, err)
	}

	first.stop()
	if accepts(addr(inf.Endpoint)) {
		t.Fatalf("the load balancer still accepts on %s after infrad stopped", addr(inf.Endpoint))
	}

	e.start() // no event: the startup resync finds the record
	testenv.Eventually(t, wait, func() bool { return accepts(addr(inf.Endpoint)) }, "load balancer reopened on %s", addr(inf.Endpoint))
	if code, _, err := get("https://" + addr(*inf.InternalEndpoint) + "/"); err != nil || code != http.StatusOK {
		t.Fatalf("request through the reopened internal listener %s: %d %v", addr(*inf.InternalEndpoint), code, err)
	}
	for i := range 10 {
		if code, _, err := get(url); err != nil || code != http.StatusOK {
			t.Fatalf("request %d through the reopened load balancer: %d %v", i, code, err)
		}
	}
	after := e.readyInfra("ha")
	if *after.InternalEndpoint != *inf.InternalEndpoint {
		t.Errorf("internal endpoint after restart %+v, want %+v", *after.InternalEndpoint, *inf.InternalEndpoint)
	}
	if !slices.Equal(ports(after), ports(inf)) {
		t.Errorf("ports after restart %v, want %v", ports(after), ports(inf))
	}
}

func TestDelete_WaitsForControlPlaneKeysThenClosesTheLoadBalancerAndRemovesTheRecord(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	ctx := t.Context()
	e.createCluster("gone", api.HighlyAvailable, api.PlatformLocal)
	inf := e.readyInfra("gone")
	lb := addr(inf.Endpoint)
	if !accepts(lb) {
		t.Fatalf("load balancer does not accept on %s", lb)
	}
	for _, comp := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer} {
		if _, err := e.components.Create(ctx, "gone."+comp, &api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: comp}, Cluster: "gone"}); err != nil {
			t.Fatal(err)
		}
	}

	// clusterd marks the cluster deleting.
	if _, _, err := e.clusters.Mutate(ctx, "gone", false, func(c *api.Cluster) error {
		now := time.Now().UTC()
		c.DeletionTimestamp = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.publishCluster("gone", "deleting")

	// infrad says it waits, and keeps everything while components remain.
	testenv.Eventually(t, wait, func() bool {
		v, _, err := e.infra.Get(ctx, "gone")
		return err == nil && strings.Contains(v.Message, "waiting for 2 control-plane components")
	}, "infra record says it waits for the components")
	if !accepts(lb) || e.published("gone", infrad.VerbDeleted) {
		t.Fatal("infra released while controlplane keys remain")
	}

	// componentd removes one component, then the other.
	if err := e.components.Delete(ctx, "gone."+api.ComponentEtcd, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.componentd.Publish(ctx, "gone", events.ResourceComponent, "deleted", "gone."+api.ComponentEtcd, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, func() bool {
		v, _, err := e.infra.Get(ctx, "gone")
		return err == nil && strings.Contains(v.Message, "waiting for 1 control-plane components")
	}, "infra record waits for the last component")
	if !accepts(lb) {
		t.Fatal("load balancer closed while a controlplane key remains")
	}
	if err := e.components.Delete(ctx, "gone."+api.ComponentKubeAPIServer, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.componentd.Publish(ctx, "gone", events.ResourceComponent, "deleted", "gone."+api.ComponentKubeAPIServer, nil); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, wait, func() bool {
		_, _, err := e.infra.Get(ctx, "gone")
		return errors.Is(err, store.ErrNotFound)
	}, "infra record deleted")
	testenv.Eventually(t, wait, func() bool { return e.published("gone", infrad.VerbDeleted) }, "infra.deleted published")
	if accepts(lb) {
		t.Errorf("load balancer still accepts on %s after deletion", lb)
	}
	resp, err := client.Get(d.url + "/v1/clusters/gone/infra")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET infra after deletion: %d, want 404", resp.StatusCode)
	}

	// A cluster key that vanished altogether counts as deleting too.
	e.createCluster("vanished", api.SingleReplica, api.PlatformLocal)
	e.readyInfra("vanished")
	if err := e.clusters.Delete(ctx, "vanished", 0); err != nil {
		t.Fatal(err)
	}
	e.publishCluster("vanished", "deleted")
	testenv.Eventually(t, wait, func() bool {
		_, _, err := e.infra.Get(ctx, "vanished")
		return errors.Is(err, store.ErrNotFound) && e.published("vanished", infrad.VerbDeleted)
	}, "infra of a vanished cluster released")
	testenv.Eventually(t, wait, func() bool {
		v, _ := metric(t, d.registry, infrad.MetricClusters, nil)
		return v == 0
	}, "%s back to 0", infrad.MetricClusters)
}

// An infrad restart while a cluster is deleting must not take its endpoint away while its
// control plane still runs: machines of its node pools go through it (drain, Node deletion).
func TestRestart_MidDelete_ReopensTheLoadBalancerUntilTheComponentsAreGone(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	ctx := t.Context()
	e.createCluster("leaving", api.HighlyAvailable, api.PlatformLocal)
	inf := e.readyInfra("leaving")
	lb := addr(inf.Endpoint)
	backend(t, addr(inf.APIServers[0]), "a")
	backend(t, addr(inf.APIServers[1]), "b")
	key := "leaving." + api.ComponentKubeAPIServer
	if _, err := e.components.Create(ctx, key, &api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: api.ComponentKubeAPIServer}, Cluster: "leaving"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.clusters.Mutate(ctx, "leaving", false, func(c *api.Cluster) error {
		now := time.Now().UTC()
		c.DeletionTimestamp = &now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.publishCluster("leaving", "deleting")
	testenv.Eventually(t, wait, func() bool {
		v, _, err := e.infra.Get(ctx, "leaving")
		return err == nil && strings.Contains(v.Message, "waiting for 1 control-plane components")
	}, "infra record says it waits for the components")

	first.stop()
	e.start() // no event: the startup resync finds the deleting cluster
	testenv.Eventually(t, wait, func() bool { return accepts(lb) }, "load balancer of the deleting cluster reopened on %s", lb)
	if code, _, err := get("https://" + lb + "/"); err != nil || code != http.StatusOK {
		t.Fatalf("request through the reopened load balancer: %d %v", code, err)
	}

	if err := e.components.Delete(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.componentd.Publish(ctx, "leaving", events.ResourceComponent, "deleted", key, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, func() bool {
		_, _, err := e.infra.Get(ctx, "leaving")
		return errors.Is(err, store.ErrNotFound) && !accepts(lb)
	}, "infra released and the load balancer closed once the components are gone")
}

func TestClusters_NeverShareAPort(t *testing.T) {
	e := newEnv(t)
	e.start()
	names := []string{"one", "two", "three", "four", "five", "six"}
	for i, n := range names {
		policy := api.SingleReplica
		if i%2 == 1 {
			policy = api.HighlyAvailable
		}
		e.createCluster(n, policy, api.PlatformLocal)
	}
	owner := map[int]string{}
	for _, n := range names {
		inf := e.readyInfra(n)
		own := ports(inf)
		slices.Sort(own)
		for _, p := range slices.Compact(own) { // a single replica's endpoint is its apiserver
			if o, ok := owner[p]; ok {
				t.Errorf("port %d is both %s's and %s's", p, o, n)
			}
			owner[p] = n
		}
	}
}

func TestUnsupportedPlatform_IsRecordedAsNotReadyWithTheReason(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.createCluster("cloudy", api.SingleReplica, "aws")
	testenv.Eventually(t, wait, func() bool {
		v, _, err := e.infra.Get(t.Context(), "cloudy")
		return err == nil && !v.Ready && strings.Contains(v.Message, `platform "aws" is not supported`) && v.Endpoint.Port == 0
	}, "an unsupported platform is recorded not ready")
}

// metric returns the value of the series of name with labels (0 if absent) and how many
// series name has.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var v float64
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			v = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return v, len(mf.GetMetric())
	}
	return 0, 0
}

// quietWriter writes into the test's output until the test's cleanups ran.
type quietWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func newQuietWriter(t *testing.T) *quietWriter {
	w := &quietWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return w
}

func (w *quietWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		fmt.Fprint(w.t.Output(), string(p))
	}
	return len(p), nil
}

// An HA record written before the balancer had an internal listener (an older infrad's) is
// given one by the upgraded infrad's first reconcile; every other port stays.
func TestUpgrade_GivesAnHARecordFromBeforeTheInternalListenerOneAndKeepsItsPorts(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	e.createCluster("old-ha", api.HighlyAvailable, api.PlatformLocal)
	inf := e.readyInfra("old-ha")
	first.stop()
	if _, _, err := e.infra.Mutate(t.Context(), "old-ha", false, func(v *api.Infra) error {
		v.InternalEndpoint = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	e.start() // the startup resync reconciles the record
	after := e.readyInfra("old-ha", func(v *api.Infra) bool { return v.InternalEndpoint != nil })
	if !slices.Equal(ports(after), ports(inf)) {
		t.Errorf("ports after the upgrade %v, want %v", ports(after), ports(inf))
	}
	if after.Generation <= inf.Generation {
		t.Errorf("generation %d after the internal port was allocated, want above %d", after.Generation, inf.Generation)
	}
	backend(t, addr(inf.APIServers[0]), "a")
	backend(t, addr(inf.APIServers[1]), "b")
	for _, ep := range []api.Endpoint{after.Endpoint, *after.InternalEndpoint} {
		if code, _, err := get("https://" + addr(ep) + "/"); err != nil || code != http.StatusOK {
			t.Errorf("request through %s after the upgrade: %d %v", addr(ep), code, err)
		}
	}
}

// Platform docker's machines are containers: endpoints on a loopback host are out of their
// reach, so infrad records the cluster not ready and says how to fix it, allocating nothing.
func TestDockerPlatform_OnALoopbackEndpointHostIsNotReadyAndSaysWhy(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.createCluster("boxed", api.SingleReplica, api.PlatformDocker)
	testenv.Eventually(t, wait, func() bool {
		v, _, err := e.infra.Get(t.Context(), "boxed")
		return err == nil && !v.Ready && strings.Contains(v.Message, "--endpoint-host") && strings.Contains(v.Message, "172.17.0.1") && v.Endpoint.Port == 0
	}, "a docker cluster on 127.0.0.1 is recorded not ready with the fix")
}
