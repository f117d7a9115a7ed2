package componentd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/test/integration/stack"
)

const (
	// upTimeout bounds a control plane's start or rollout: generous, the machine is shared.
	upTimeout = 5 * time.Minute
	wait      = time.Minute
)

// harness is one embedded NATS, the real infrad and pkid, and a stand-in for clusterd: the
// test writes Cluster records and publishes cluster events as clusterd would.
type harness struct {
	*stack.Env
	clusters   *store.Store[api.Cluster]
	components *store.Store[api.ControlPlaneComponent]
	pki        *store.Store[api.ClusterPKI]
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessFor(t, release.Versions()...)
}

// newHarnessFor is newHarness for a test that needs only the binaries of versions.
func newHarnessFor(t testing.TB, versions ...string) *harness {
	t.Helper()
	for _, v := range versions {
		rel, err := release.Lookup(v)
		if err != nil {
			t.Fatal(err)
		}
		testenv.RequireBinaries(t, rel, release.Components()...)
	}
	o := stack.Options{TailLines: 120, KeepLogEnv: "COMPONENTD_TEST_LOG"}
	if keep := os.Getenv("COMPONENTD_TEST_DATA_DIR"); keep != "" { // for debugging: kept
		o.DataDir = filepath.Join(keep, t.Name())
		if err := os.RemoveAll(o.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	st := stack.New(t, o)
	return &harness{
		Env:        st,
		clusters:   stack.Bucket[api.Cluster](st, bus.BucketClusters),
		components: stack.Bucket[api.ControlPlaneComponent](st, bus.BucketControlPlane),
		pki:        stack.Bucket[api.ClusterPKI](st, bus.BucketPKI),
	}
}

// componentdProc is one running componentd.
type componentdProc struct {
	d    *componentd.Daemon
	reg  *prometheus.Registry
	url  string
	stop func()
}

func (h *harness) startComponentd() *componentdProc {
	h.T.Helper()
	return h.startComponentdWith(componentd.Config{})
}

// startComponentdWith starts a componentd with cfg (its Base is the harness's).
func (h *harness) startComponentdWith(cfg componentd.Config) *componentdProc {
	h.T.Helper()
	reg := observe.NewRegistry()
	mgmt := cfg.ManagementKubeconfig
	cfg.Base = h.Base(componentd.Name, reg)
	cfg.ManagementKubeconfig = mgmt
	d, err := componentd.New(cfg)
	if err != nil {
		h.T.Fatal(err)
	}
	stop, addr := h.Run("componentd", d)
	return &componentdProc{d: d, reg: reg, url: "http://" + addr, stop: stop}
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
	h.T.Helper()
	h.CreateCluster(stack.Cluster(name, version, policy))
}

func (h *harness) upgrade(name, version string) {
	h.T.Helper()
	if _, _, err := h.clusters.Mutate(h.Ctx, name, true, func(c *api.Cluster) error {
		c.Spec.Release.Version = version
		return nil
	}); err != nil {
		h.T.Fatal(err)
	}
	h.PublishCluster(name, "updated")
}

// setHibernation sets the cluster's spec.hibernation.enabled, as clusterd does.
func (h *harness) setHibernation(name string, enabled bool) {
	h.T.Helper()
	if _, _, err := h.clusters.Mutate(h.Ctx, name, true, func(c *api.Cluster) error {
		c.Spec.Hibernation = &api.Hibernation{Enabled: &enabled}
		return nil
	}); err != nil {
		h.T.Fatal(err)
	}
	h.PublishCluster(name, "updated")
}

// componentsOf returns the cluster's records by component name.
func (h *harness) componentsOf(cluster string) map[string]*store.Entry[api.ControlPlaneComponent] {
	h.T.Helper()
	list, err := h.components.List(h.Ctx, cluster+".*")
	if err != nil {
		h.T.Fatal(err)
	}
	out := map[string]*store.Entry[api.ControlPlaneComponent]{}
	for i := range list {
		out[list[i].Value.Name] = &list[i]
	}
	return out
}

var componentNames = []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler}

// settled reports whether every control-plane component of the cluster is Available and
// RolloutComplete at version with every replica ready. (The autoscaler, idle without an
// autoscaled pool, is not one of them.)
func settled(comps map[string]*store.Entry[api.ControlPlaneComponent], version string) bool {
	for _, name := range componentNames {
		e, ok := comps[name]
		if !ok {
			return false
		}
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
	h.T.Helper()
	var comps map[string]*store.Entry[api.ControlPlaneComponent]
	deadline := time.Now().Add(upTimeout)
	for {
		comps = h.componentsOf(cluster)
		if settled(comps, version) {
			return comps
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(comps, "", "  ")
			h.T.Fatalf("cluster %s not settled at %s within %v:\n%s", cluster, version, upTimeout, b)
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

func (h *harness) serverVersion(cs *kubernetes.Clientset) string {
	h.T.Helper()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		h.T.Fatal(err)
	}
	return v.GitVersion
}

// get GETs url and returns the status, content type and body.
func get(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url)
}

// post POSTs to url with no body and returns the status, content type and body.
func post(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url)
}

func do(t *testing.T, method, url string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
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
