package e2e

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// startStackAt starts `hostplane dev` on dir (a restart when dir holds an earlier stack's
// state) and returns it with a client; the caller stops it. opts change the configuration.
func startStackAt(t *testing.T, dir string, opts ...func(*dev.Config)) (*dev.Stack, *client) {
	t.Helper()
	cfg := dev.Config{
		DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1, KarpenterBinary: testenv.KarpenterBinary(t),
		Logger: slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := dev.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s.URL(), s.AdminToken(), dir)
	testenv.Eventually(t, time.Minute, func() bool {
		code, _ := c.do("GET", "/healthz", "", nil)
		return code == http.StatusOK
	}, "hostplane dev never became healthy")
	return s, c
}

// startStackToStop is startStackAt for a test that stops the stack itself (a restart): stop
// stops it once, and the cleanup stops it if the test did not get that far.
func startStackToStop(t *testing.T, dir string) (*client, func()) {
	t.Helper()
	s, c := startStackAt(t, dir)
	stop := sync.OnceFunc(func() { s.Stop(context.Background()) })
	t.Cleanup(stop)
	return c, stop
}

// Stopping hostplane dev (Ctrl-C) right after deleting a cluster that has a node pool stops
// the cluster's control plane with everything else, while Cluster API is still draining the
// pool's machine. Started again, the deletion must finish: the control plane runs again
// until the machines are gone, the drain (which a guest PodDisruptionBudget blocks for ever
// here, and no nodeDrainTimeout bounds) is skipped because the guest's workloads go with the
// cluster, and then nothing of the cluster may be left: process, port, machine or KV key.
func TestCluster_DeletedWithANodePool_FinishesAfterAStopMidDelete(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	c, stop := startStackToStop(t, dir)
	const cl = "leaving"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	got := c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	endpoint := net.JoinHostPort(got.Status.ControlPlaneEndpoint.Host, strconv.Itoa(got.Status.ControlPlaneEndpoint.Port))
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":1,
		"release":{"version":"`+newRelease+`"},"management":{"upgradeType":"Replace"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "workers", 1, poolReady)
	blockDrain(t, c.kubeClient(cl))

	if code, body := c.do("DELETE", "/v1/clusters/"+cl, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete cluster: %d %s", code, body)
	}
	stop() // as Ctrl-C does, right after the DELETE

	s2, c2 := startStackAt(t, dir)
	t.Cleanup(func() { s2.Stop(context.Background()) })
	var last api.Cluster
	testenv.Eventually(t, 4*time.Minute, func() bool {
		var code int
		last, code = c2.cluster(cl)
		if code == http.StatusOK {
			// Deleting always says what it waits for.
			if cond, ok := last.Status.Conditions.Get(api.ConditionDeleting); ok && cond.Message == "" {
				t.Errorf("Deleting has no message: %+v", cond)
			}
		}
		return code == http.StatusNotFound
	}, "cluster %s never finished deleting after the restart: %s", cl, lazyJSON{&last})
	// The local cloud keeps a directory per machine of a cluster while the machine exists.
	testenv.Eventually(t, time.Minute, func() bool {
		left, _ := os.ReadDir(filepath.Join(dir, "localcloud", "machines", cl))
		return len(left) == 0
	}, "the local cloud still holds machines of the deleted cluster")
	if left := testenv.ProcessesUnder(filepath.Join(dir, "componentd", "clusters", cl)); len(left) > 0 {
		t.Errorf("processes of the deleted cluster still run: pids %v", left)
	}
	assertNothingLeft(t, s2, c2, cl, endpoint)
}

// blockDrain runs a pod in the guest behind a PodDisruptionBudget that allows no eviction,
// so draining its node never ends on its own, and waits until it runs.
func blockDrain(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	d := testenv.PauseDeployment("precious", 1, "10m", nil)
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "precious"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels}},
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() bool {
		p, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "precious", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0
	}, "the guest pod never ran behind its PodDisruptionBudget")
}

// Stopping hostplane dev right after creating a cluster and its node pool, before either is
// ready, and starting it again: both finish, the pool with exactly the machines it asked for
// (none created twice), and the cluster can then be deleted without anything left.
func TestCluster_AndNodePool_FinishAfterAStopMidCreate(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	c, stop := startStackToStop(t, dir)
	const cl = "interrupted"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":2,
		"release":{"version":"`+newRelease+`"},"management":{"upgradeType":"Replace"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	// Stop once the control plane is partly up: etcd runs, the cluster is not Available yet.
	testenv.Eventually(t, available, func() bool {
		got, _ := c.cluster(cl)
		return got.Status.Conditions.IsTrue(api.ConditionEtcdAvailable)
	}, "etcd of %s never became available", cl)
	stop()

	s2, c2 := startStackAt(t, dir)
	t.Cleanup(func() { s2.Stop(context.Background()) })
	c2.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	c2.waitPoolReady(cl, "workers", 2, poolReady)
	if ms := c2.poolMachines(cl, "workers"); len(ms) != 2 {
		t.Errorf("the pool has %d machines after the restart, want 2: %+v", len(ms), ms)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "localcloud", "machines", cl)); len(left) != 2 {
		t.Errorf("the local cloud runs %d machines of %s, want 2", len(left), cl)
	}
	deleteCluster(t, s2, c2, cl, poolReady+available)
}
