package ignitiond_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/ignitiond"
	"github.com/hostplane/hostplane/test/integration/stack"
)

const wait = 30 * time.Second

// harness is one embedded NATS with the real pkid and infrad, and stand-ins for clusterd and
// nodepoold: the test writes their records and publishes their events as they would.
type harness struct {
	*stack.Env
	clusters  *store.Store[api.Cluster]
	nodepools *store.Store[api.NodePool]
	pki       *store.Store[api.ClusterPKI]
	infra     *store.Store[api.Infra]
	servers   *store.Store[api.IgnitionServer]
	tokens    *store.Store[api.IgnitionTokens]
	nodepoold *bus.Publisher
	events    *eventLog
	pkidURL   string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st := stack.New(t, stack.Options{Level: slog.LevelDebug})
	ign := st.NATS
	h := &harness{Env: st, events: &eventLog{},
		clusters:  stack.Bucket[api.Cluster](st, bus.BucketClusters),
		nodepools: stack.Bucket[api.NodePool](st, bus.BucketNodePools),
		pki:       stack.Bucket[api.ClusterPKI](st, bus.BucketPKI),
		infra:     stack.Bucket[api.Infra](st, bus.BucketInfra),
		servers:   stack.Bucket[api.IgnitionServer](st, bus.BucketIgnition),
		tokens:    stack.Bucket[api.IgnitionTokens](st, bus.BucketIgnition),
		nodepoold: bus.NewPublisher(ign.JS, "nodepoold"),
	}
	sub, err := ign.Conn.Subscribe(events.ResourceFilter(events.ResourceIgnition), h.events.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	st.StartInfrad()
	h.pkidURL = st.StartPKID()
	return h
}

// waitReady waits until d is ready and returns its admin address.
func (h *harness) waitReady(name string, d stack.Runner) string {
	h.T.Helper()
	actx, cancel := context.WithTimeout(h.Ctx, wait)
	defer cancel()
	addr := d.AdminAddr(actx)
	testenv.Eventually(h.T, wait, func() bool { return d.Ready(h.Ctx) == nil }, "%s ready", name)
	return addr
}

// ignitiondProc is one running ignitiond.
type ignitiondProc struct {
	d    *ignitiond.Daemon
	reg  *prometheus.Registry
	stop func()
}

func (h *harness) startIgnitiond(cfg ignitiond.Config) *ignitiondProc {
	h.T.Helper()
	reg := observe.NewRegistry()
	clk := cfg.Clock // a test's fake clock, or nil: the real one
	cfg.Base = h.Base(ignitiond.Name, reg)
	cfg.Clock = clk
	d, err := ignitiond.New(cfg)
	if err != nil {
		h.T.Fatal(err)
	}
	_, stop := testenv.Run(h.T, "ignitiond Run", d.Run)
	h.waitReady("ignitiond", d)
	return &ignitiondProc{d: d, reg: reg, stop: stop}
}

func (p *ignitiondProc) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := testenv.Metric(t, p.reg, name, labels)
	return v
}

// createCluster writes a live cluster as clusterd would and publishes cluster.created.
func (h *harness) createCluster(name string) {
	h.T.Helper()
	h.CreateCluster(stack.Cluster(name, "1.34.4", api.SingleReplica))
}

func (h *harness) publish(p *bus.Publisher, cluster string, res events.Resource, verb, key string) {
	h.T.Helper()
	if _, err := p.Publish(h.Ctx, cluster, res, verb, key, nil); err != nil {
		h.T.Fatal(err)
	}
}

// poolSpec is what a test sets of a pool.
type poolSpec struct {
	hash, release string
	labels        map[string]string
	taints        []api.Taint
	config        []api.ConfigDocument
}

// putPool writes (or replaces the spec and hash of) a pool as nodepoold would and publishes
// nodepool.created or nodepool.updated with key "<cluster>/<nodepool>".
func (h *harness) putPool(cluster, name string, s poolSpec) {
	h.T.Helper()
	key := api.NodePoolKey(cluster, name)
	apply := func(np *api.NodePool) error {
		np.Spec.Release = api.Release{Version: s.release}
		np.Spec.NodeLabels, np.Spec.Taints, np.Spec.Config = s.labels, s.taints, s.config
		np.Spec.Management.UpgradeType = api.UpgradeTypeReplace
		np.Status.ConfigHash = s.hash
		return nil
	}
	verb := "updated"
	_, _, err := h.nodepools.Mutate(h.Ctx, key, true, apply)
	if errors.Is(err, store.ErrNotFound) {
		np := &api.NodePool{ObjectMeta: api.ObjectMeta{Name: name}, Cluster: cluster}
		_ = apply(np)
		_, err = h.nodepools.Create(h.Ctx, key, np)
		verb = "created"
	}
	if err != nil {
		h.T.Fatal(err)
	}
	h.publish(h.nodepoold, cluster, events.ResourceNodePool, verb, cluster+"/"+name)
}

// nudgePool publishes a nodepool event for the pool without changing it, as a reconcile's
// timer would fire: the timers of the reconcile queue run on the real clock, so a test that
// steps ignitiond's fake clock past a rotation or a grace has the pool looked at again.
func (h *harness) nudgePool(cluster, name string) {
	h.T.Helper()
	h.publish(h.nodepoold, cluster, events.ResourceNodePool, "updated", cluster+"/"+name)
}

// deletePool removes the pool's key as nodepoold does once its machines are gone.
func (h *harness) deletePool(cluster, name string) {
	h.T.Helper()
	if err := h.nodepools.Delete(h.Ctx, api.NodePoolKey(cluster, name), 0); err != nil {
		h.T.Fatal(err)
	}
	h.publish(h.nodepoold, cluster, events.ResourceNodePool, "deleted", cluster+"/"+name)
}

// waitServer waits for the cluster's ignition server record to be ready.
func (h *harness) waitServer(cluster string, cond ...func(*api.IgnitionServer) bool) *api.IgnitionServer {
	h.T.Helper()
	var got *api.IgnitionServer
	testenv.Eventually(h.T, wait, func() bool {
		s, _, err := h.servers.Get(h.Ctx, cluster)
		if err != nil || !s.Ready {
			return false
		}
		for _, c := range cond {
			if !c(s) {
				return false
			}
		}
		got = s
		return true
	}, "ignition server of %s ready", cluster)
	return got
}

// waitTokens waits for the pool's token record to satisfy cond.
func (h *harness) waitTokens(cluster, np, what string, cond func(*api.IgnitionTokens) bool) *api.IgnitionTokens {
	h.T.Helper()
	var got *api.IgnitionTokens
	testenv.Eventually(h.T, wait, func() bool {
		r, _, err := h.tokens.Get(h.Ctx, api.NodePoolKey(cluster, np))
		if err != nil || !cond(r) {
			return false
		}
		got = r
		return true
	}, "tokens of %s/%s: %s", cluster, np, what)
	return got
}

// readyFor waits for the pool's record to be ready with a token for hash.
func (h *harness) readyFor(cluster, np, hash string) *api.IgnitionTokens {
	h.T.Helper()
	return h.waitTokens(cluster, np, "ready for "+hash, func(r *api.IgnitionTokens) bool {
		return r.Ready && r.Current.ConfigHash == hash && len(r.UserData) > 0
	})
}

// rootCA returns the cluster's root CA (PEM) and a pool trusting it.
func (h *harness) rootCA(cluster string) ([]byte, *x509.CertPool) {
	h.T.Helper()
	p, _, err := h.pki.Get(h.Ctx, cluster)
	if err != nil {
		h.T.Fatal(err)
	}
	pem := p.Certs[api.CertRootCA].CertPEM
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		h.T.Fatal("root CA does not parse")
	}
	return pem, pool
}

// client returns an HTTPS client trusting the cluster's root CA and nothing else.
func (h *harness) client(cluster string) *http.Client {
	_, pool := h.rootCA(cluster)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
}

// response is one answer of the Ignition server.
type response struct {
	status      int
	contentType string
	body        []byte
}

// fetch GETs url with the Authorization header values (none when empty).
func fetch(t *testing.T, c *http.Client, url string, auth ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}

// payload is a served config, parsed as a machine would.
type payload struct {
	kubeconfig []byte
	ca         []byte
	kubelet    ignition.KubeletConfig
	files      map[string]string
}

func parsePayload(t *testing.T, r response) payload {
	t.Helper()
	if r.status != http.StatusOK || r.contentType != ignition.MediaType {
		t.Fatalf("GET /ignition: %d %q %s", r.status, r.contentType, r.body)
	}
	cfg, err := ignition.Parse(r.body)
	if err != nil {
		t.Fatalf("the payload does not parse and validate: %v", err)
	}
	p := payload{files: map[string]string{}}
	for _, f := range cfg.Storage.Files {
		b, err := ignition.FileContents(cfg, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		p.files[f.Path] = string(b)
	}
	p.kubeconfig = []byte(p.files[ignition.PathBootstrapKubeconfig])
	p.ca = []byte(p.files[ignition.PathCACert])
	if err := json.Unmarshal([]byte(p.files[ignition.PathKubeletConfig]), &p.kubelet); err != nil {
		t.Fatalf("kubelet.json: %v", err)
	}
	return p
}

// stub parses a record's userdata.
func stub(t *testing.T, r *api.IgnitionTokens) ignition.StubInfo {
	t.Helper()
	s, err := ignition.ParseStub(r.UserData)
	if err != nil {
		t.Fatalf("userdata: %v", err)
	}
	return s
}

// eventLog records the ignition events published.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) record(m *nats.Msg) {
	ev, err := events.Decode(m.Data)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

// count is how many events of type io.hostplane.ignition.<verb> about key were published.
func (l *eventLog) count(verb, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.evs {
		if e.Type == events.TypePrefix+"ignition."+verb && e.Subject == key && e.Source == "/hostplane/ignitiond" {
			n++
		}
	}
	return n
}

func (h *harness) waitEvent(verb, key string, atLeast int) {
	h.T.Helper()
	testenv.Eventually(h.T, wait, func() bool { return h.events.count(verb, key) >= atLeast }, "%d ignition.%s events about %s", atLeast, verb, key)
}

func itoa(i int) string { return strconv.Itoa(i) }

// equalJSON reports whether a and b marshal to the same JSON.
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
