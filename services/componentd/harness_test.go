package componentd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/pkid"
)

const (
	// upTimeout bounds a control plane's start or rollout: generous, the machine is shared.
	upTimeout = 5 * time.Minute
	wait      = time.Minute
)

// harness is one embedded NATS, the real infrad and pkid, and a stand-in for clusterd: the
// test writes Cluster records and publishes cluster events as clusterd would.
type harness struct {
	t          *testing.T
	ctx        context.Context
	env        *testenv.NATSEnv
	dataDir    string
	logger     *slog.Logger
	clusters   *store.Store[api.Cluster]
	components *store.Store[api.ControlPlaneComponent]
	pki        *store.Store[api.ClusterPKI]
	clusterd   *bus.Publisher
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	for _, v := range release.Versions() {
		rel, err := release.Lookup(v)
		if err != nil {
			t.Fatal(err)
		}
		testenv.RequireBinaries(t, rel, release.Components()...)
	}
	env := testenv.NATS(t)
	h := &harness{t: t, ctx: t.Context(), env: env, dataDir: t.TempDir()}
	if keep := os.Getenv("COMPONENTD_TEST_DATA_DIR"); keep != "" { // for debugging: kept
		h.dataDir = filepath.Join(keep, t.Name())
		if err := os.RemoveAll(h.dataDir); err != nil {
			t.Fatal(err)
		}
	}
	h.logger = slog.New(slog.NewTextHandler(h.logFile(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Registered before any daemon starts, so it runs after they stopped: every process a
	// componentd of this test started is stopped, even when the test failed half-way.
	t.Cleanup(h.stopEverything)
	bucket := func(name string) *store.Store[api.Cluster] {
		b, err := bus.EnsureBucket(h.ctx, env.JS, name)
		if err != nil {
			t.Fatal(err)
		}
		return store.New[api.Cluster](b)
	}
	h.clusters = bucket(bus.BucketClusters)
	cp, err := bus.EnsureBucket(h.ctx, env.JS, bus.BucketControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	h.components = store.New[api.ControlPlaneComponent](cp)
	pk, err := bus.EnsureBucket(h.ctx, env.JS, bus.BucketPKI)
	if err != nil {
		t.Fatal(err)
	}
	h.pki = store.New[api.ClusterPKI](pk)
	h.clusterd = bus.NewPublisher(env.JS, "clusterd")
	return h
}

// logFile collects every daemon's log in a file outside the data dir; a failed test prints
// its end.
func (h *harness) logFile() io.Writer {
	path := filepath.Join(h.t.TempDir(), "daemons.log")
	f, err := os.Create(path)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		if keep := os.Getenv("COMPONENTD_TEST_LOG"); keep != "" {
			b, _ := os.ReadFile(path)
			_ = os.WriteFile(keep, b, 0o600)
		}
		if h.t.Failed() {
			b, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			h.t.Logf("--- last daemon log lines ---\n%s", strings.Join(lines[max(0, len(lines)-120):], "\n"))
		}
		_ = f.Close()
	})
	return f
}

func (h *harness) base(reg *prometheus.Registry) daemon.Base {
	return daemon.Base{
		NATSURL:   h.env.Server.URL(),
		DataDir:   h.dataDir,
		AdminAddr: "127.0.0.1:0",
		Logger:    h.logger,
		Registry:  reg,
	}
}

// runner is a daemon: New(...).Run.
type runner interface {
	Run(ctx context.Context) error
	Ready(ctx context.Context) error
	AdminAddr(ctx context.Context) string
}

// run starts d and returns a func that stops it (also called at cleanup) and its address.
func (h *harness) run(name string, d runner) (stop func(), addr string) {
	h.t.Helper()
	_, stop = testenv.Run(h.t, name+" Run", d.Run)
	actx, cancelAddr := context.WithTimeout(h.ctx, wait)
	defer cancelAddr()
	addr = d.AdminAddr(actx)
	testenv.Eventually(h.t, wait, func() bool { return d.Ready(h.ctx) == nil }, "%s ready", name)
	return stop, addr
}

func (h *harness) startInfrad() {
	h.t.Helper()
	d, err := infrad.New(infrad.Config{Base: h.base(observe.NewRegistry())})
	if err != nil {
		h.t.Fatal(err)
	}
	h.run("infrad", d)
}

// startPKID starts pkid and returns its base URL.
func (h *harness) startPKID() string {
	h.t.Helper()
	d, err := pkid.New(pkid.Config{Base: h.base(observe.NewRegistry())})
	if err != nil {
		h.t.Fatal(err)
	}
	_, addr := h.run("pkid", d)
	return "http://" + addr
}

// componentdProc is one running componentd.
type componentdProc struct {
	d    *componentd.Daemon
	reg  *prometheus.Registry
	url  string
	stop func()
}

func (h *harness) startComponentd() *componentdProc {
	h.t.Helper()
	return h.startComponentdWith(componentd.Config{})
}

// startComponentdWith starts a componentd with cfg (its Base is the harness's).
func (h *harness) startComponentdWith(cfg componentd.Config) *componentdProc {
	h.t.Helper()
	reg := observe.NewRegistry()
	mgmt := cfg.ManagementKubeconfig
	cfg.Base = h.base(reg)
	cfg.ManagementKubeconfig = mgmt
	d, err := componentd.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	stop, addr := h.run("componentd", d)
	return &componentdProc{d: d, reg: reg, url: "http://" + addr, stop: stop}
}

// stopEverything stops every process left (as hostplane dev's shutdown would) and fails the
// test if any process still names the data dir.
func (h *harness) stopEverything() {
	d, err := componentd.New(componentd.Config{Base: daemon.Base{DataDir: h.dataDir, Logger: h.logger}})
	if err != nil {
		h.t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.StopAll(ctx); err != nil {
		h.t.Errorf("StopAll: %v", err)
	}
	if left := processesUnder(h.dataDir); len(left) > 0 {
		h.t.Errorf("processes left running under %s: %v", h.dataDir, left)
	}
}

// processesUnder returns the pids whose command line mentions dir.
func processesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(dir)) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// startTicks is a process's start time (field 22 of /proc/<pid>/stat): the same pid with
// the same start time is the same process.
func startTicks(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[22-3]
}

func (h *harness) createCluster(name, version, policy string) {
	h.t.Helper()
	c := &api.Cluster{
		ObjectMeta: api.ObjectMeta{Name: name},
		Spec: api.ClusterSpec{
			Release:                      api.Release{Version: version},
			Platform:                     api.Platform{Type: api.PlatformLocal},
			ControllerAvailabilityPolicy: policy,
		},
	}
	if _, err := h.clusters.Create(h.ctx, name, c); err != nil {
		h.t.Fatal(err)
	}
	h.publish(name, "created")
}

func (h *harness) publish(cluster, verb string) {
	h.t.Helper()
	if _, err := h.clusterd.Publish(h.ctx, cluster, events.ResourceCluster, verb, cluster, nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) upgrade(name, version string) {
	h.t.Helper()
	if _, _, err := h.clusters.Mutate(h.ctx, name, true, func(c *api.Cluster) error {
		c.Spec.Release.Version = version
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	h.publish(name, "updated")
}

func (h *harness) markDeleting(name string) {
	h.t.Helper()
	if _, _, err := h.clusters.Mutate(h.ctx, name, false, func(c *api.Cluster) error {
		now := time.Now().UTC()
		c.DeletionTimestamp = &now
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	h.publish(name, "deleting")
}

// componentsOf returns the cluster's records by component name.
func (h *harness) componentsOf(cluster string) map[string]*store.Entry[api.ControlPlaneComponent] {
	h.t.Helper()
	list, err := h.components.List(h.ctx, cluster+".*")
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*store.Entry[api.ControlPlaneComponent]{}
	for i := range list {
		out[list[i].Value.Name] = &list[i]
	}
	return out
}

var componentNames = []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler}

// settled reports whether every component of the cluster is Available and RolloutComplete at
// version with every replica ready.
func settled(comps map[string]*store.Entry[api.ControlPlaneComponent], version string) bool {
	if len(comps) != len(componentNames) {
		return false
	}
	for _, e := range comps {
		c := e.Value
		st := c.Status
		if !st.Conditions.IsTrue(api.ConditionAvailable) || !st.Conditions.IsTrue(api.ConditionRolloutComplete) ||
			st.Version != version || c.Spec.Version != version || st.ReadyReplicas != c.Spec.Replicas {
			return false
		}
	}
	return true
}

func (h *harness) waitSettled(cluster, version string) map[string]*store.Entry[api.ControlPlaneComponent] {
	h.t.Helper()
	var comps map[string]*store.Entry[api.ControlPlaneComponent]
	deadline := time.Now().Add(upTimeout)
	for {
		comps = h.componentsOf(cluster)
		if settled(comps, version) {
			return comps
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(comps, "", "  ")
			h.t.Fatalf("cluster %s not settled at %s within %v:\n%s", cluster, version, upTimeout, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pids returns every replica's pid by replica name.
func pids(comps map[string]*store.Entry[api.ControlPlaneComponent]) map[string]int {
	out := map[string]int{}
	for _, e := range comps {
		for _, r := range e.Value.Status.Replicas {
			out[r.Name] = r.Pid
		}
	}
	return out
}

// adminClientset opens the admin kubeconfig from the PKI record, as clusterd would.
func (h *harness) adminClientset(cluster string) *kubernetes.Clientset {
	h.t.Helper()
	p, _, err := h.pki.Get(h.ctx, cluster)
	if err != nil {
		h.t.Fatal(err)
	}
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(h.dataDir, "pki.key"))
	if err != nil {
		h.t.Fatal(err)
	}
	kc, err := seal.Open(p.Kubeconfigs[api.KubeconfigAdmin])
	if err != nil {
		h.t.Fatal(err)
	}
	cs, err := kube.Clientset(kc)
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

func (h *harness) serverVersion(cs *kubernetes.Clientset) string {
	h.t.Helper()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		h.t.Fatal(err)
	}
	return v.GitVersion
}

// get GETs url and returns the status, content type and body.
func get(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func countLines(b []byte) int {
	n := 0
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		n++
	}
	return n
}
