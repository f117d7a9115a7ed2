package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// Time bounds of the node pool flows (generous: CI machines have two cores).
const (
	poolReady   = 4 * time.Minute
	poolRollout = 6 * time.Minute
	poolRepair  = 6 * time.Minute
)

func (c *client) nodePool(cluster, name string) (api.NodePool, int) {
	var np api.NodePool
	code, _ := c.do("GET", "/v1/clusters/"+cluster+"/nodepools/"+name, "", &np)
	return np, code
}

func (c *client) machines(cluster string) []api.Machine {
	c.t.Helper()
	var list api.MachineList
	if code, body := c.do("GET", "/v1/clusters/"+cluster+"/machines", "", &list); code != http.StatusOK {
		c.t.Fatalf("machines: %d %s", code, body)
	}
	return list.Items
}

func (c *client) poolMachines(cluster, pool string) []api.Machine {
	var out []api.Machine
	for _, m := range c.machines(cluster) {
		if m.NodePool == pool {
			out = append(out, m)
		}
	}
	return out
}

func machineNames(ms []api.Machine) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// waitPoolReady waits until the pool has want machines, all with a Ready node, running its
// current config hash, and returns the pool.
func (c *client) waitPoolReady(cluster, pool string, want int32, timeout time.Duration) api.NodePool {
	c.t.Helper()
	var np api.NodePool
	testenv.Eventually(c.t, timeout, func() bool {
		np, _ = c.nodePool(cluster, pool)
		return poolSettled(np, want)
	}, "node pool %s/%s never had %d ready, updated machines: %s\nmachines: %s", cluster, pool, want, lazyJSON{&np}, lazyJSON{c.poolMachines(cluster, pool)})
	return np
}

// poolSettled reports whether np has observed its spec and has want ready, updated
// machines and is Ready.
func poolSettled(np api.NodePool, want int32) bool {
	st := np.Status
	return st.ObservedGeneration == np.Generation && st.Replicas == want && st.ReadyReplicas == want &&
		st.UpdatedReplicas == want && st.Conditions.IsTrue(api.NodePoolConditionReady)
}

// readyNodes lists the guest cluster's Ready nodes of the pool.
func readyNodes(t *testing.T, kc *kubernetes.Clientset, pool string) []corev1.Node {
	t.Helper()
	nodes, err := kc.CoreV1().Nodes().List(ctx(t), metav1.ListOptions{LabelSelector: api.LabelNodePool + "=" + pool})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	var out []corev1.Node
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				out = append(out, n)
			}
		}
	}
	return out
}

// machineWatch records, while it runs, every machine name of a pool and the most machines
// (not being deleted) seen at once.
type machineWatch struct {
	mu      sync.Mutex
	seen    map[string]bool
	maxLive int
	stop    chan struct{}
	done    chan struct{}
}

func (c *client) watchMachines(cluster, pool string) *machineWatch {
	w := &machineWatch{seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var list api.MachineList
			if code, _ := c.do("GET", "/v1/clusters/"+cluster+"/machines", "", &list); code == http.StatusOK {
				live := 0
				w.mu.Lock()
				for _, m := range list.Items {
					if m.NodePool != pool {
						continue
					}
					w.seen[m.Name] = true
					if m.Phase != "Deleting" && m.Phase != "Deleted" {
						live++
					}
				}
				w.maxLive = max(w.maxLive, live)
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

// waitRolledOut waits until the pool has a new config hash (not hashBefore) and want ready
// machines, all at that hash and none of them one of first (each was replaced).
func (c *client) waitRolledOut(cluster, pool, hashBefore string, first []string, want int32) api.NodePool {
	c.t.Helper()
	var np api.NodePool
	testenv.Eventually(c.t, poolRollout, func() bool {
		np, _ = c.nodePool(cluster, pool)
		if np.Status.ConfigHash == hashBefore || np.Status.ConfigHash == "" {
			return false
		}
		ms := c.poolMachines(cluster, pool)
		for _, m := range ms {
			if m.ConfigHash != np.Status.ConfigHash || slices.Contains(first, m.Name) {
				return false
			}
		}
		return len(ms) == int(want) && np.Status.ReadyReplicas == want
	}, "the rollout of %s never finished: %s\nmachines: %s", pool, lazyJSON{&np}, lazyJSON{c.poolMachines(cluster, pool)})
	return np
}

func (w *machineWatch) finish() (seen []string, maxLive int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for n := range w.seen {
		seen = append(seen, n)
	}
	slices.Sort(seen)
	return seen, w.maxLive
}

const motdConfig = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hello%20from%20hostplane"},"mode":420}]}}`

// TestNodePool_JoinRollRelabelRepairInPlaceDrainDelete drives one cluster's node pools
// through the whole life ARCHITECTURE section 5 describes, through the HTTP API, with
// Cluster API's real controllers, the HTTPS Ignition server and the local cloud's machines.
func TestNodePool_JoinRollRelabelRepairInPlaceDrainDelete(t *testing.T) {
	s, c := stack(t)
	// A real Prometheus scrapes the stack from before the cluster exists to after the first
	// rollout, with deploy/prometheus's rules loaded.
	prom := startPrometheus(t, c)
	const cl = "pools"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	kc := c.kubeClient(cl)

	// 1. Three machines boot from Ignition and join: three Ready nodes.
	code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":3,
		"release":{"version":"`+newRelease+`"},
		"management":{"upgradeType":"Replace","autoRepair":true,
			"replace":{"strategy":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}},
			"autoRepairPolicy":{"nodeNotReadyTimeout":"20s","nodeStartupTimeout":"5m"}},
		"nodeDrainTimeout":"20s"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	np := c.waitPoolReady(cl, "workers", 3, poolReady)
	nodes := readyNodes(t, kc, "workers")
	if len(nodes) != 3 {
		t.Fatalf("ready nodes of workers = %d, want 3", len(nodes))
	}
	for _, n := range nodes {
		if !strings.HasPrefix(n.Spec.ProviderID, "local://"+cl+"/") || n.Status.NodeInfo.KubeletVersion != "v"+newRelease {
			t.Errorf("node %s: providerID %q kubelet %q", n.Name, n.Spec.ProviderID, n.Status.NodeInfo.KubeletVersion)
		}
	}
	if np.Status.Version != newRelease {
		t.Errorf("pool version = %q, want %s", np.Status.Version, newRelease)
	}
	first := machineNames(c.poolMachines(cl, "workers"))
	assertClusterctlDescribesItHealthy(t, s, c, cl, "workers", 3)
	if got := c.waitCondition(cl, "IgnitionEndpointAvailable", api.ConditionTrue, time.Minute); got.Status.IgnitionEndpoint == "" {
		t.Errorf("no status.ignitionEndpoint once the machines booted from it")
	}
	// deploy/grafana's panels against this running stack (autoscaling.json: the autoscaling test)
	assertDashboardsQueryExportedMetrics(t, c, "cluster-detail.json", "fleet-overview.json", "ignition-pki.json", "nats-jetstream.json", "rollouts.json")

	// 2. A config change replaces every machine exactly once, at most maxSurge extra.
	hashBefore := np.Status.ConfigHash
	w := c.watchMachines(cl, "workers")
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": []api.ConfigDocument{{Name: "motd", Content: motdConfig}}}})
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/workers", string(patch), nil); code != http.StatusOK {
		t.Fatalf("config change: %d %s", code, body)
	}
	np = c.waitRolledOut(cl, "workers", hashBefore, first, 3)
	seen, maxLive := w.finish()
	if len(seen) != 6 {
		t.Errorf("machines seen during the rollout = %v (%d), want the 3 old and 3 new: each replaced exactly once", seen, len(seen))
	}
	if maxLive > 4 {
		t.Errorf("at most %d machines at once during the rollout, want ≤ 3 + maxSurge 1", maxLive)
	}
	rolled := machineNames(c.poolMachines(cl, "workers"))
	// Every panel of those dashboards through Prometheus, over a cluster, a ready pool and its
	// rollout; then an alert fires.
	assertDashboardsInPrometheus(t, prom, map[string]string{"cluster": cl, "nodepool": "workers"},
		"cluster-detail.json", "fleet-overview.json", "ignition-pki.json", "nats-jetstream.json", "rollouts.json")
	assertAlertFires(t, c, prom, cl)
	prom.Stop()
	if testenv.Alive(prom.Pid()) {
		t.Errorf("prometheus (pid %d) still runs after Stop", prom.Pid())
	}

	// 3. A label change reaches every node without replacing a machine.
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/workers", `{"spec":{"nodeLabels":{"tier":"gold"}}}`, nil); code != http.StatusOK {
		t.Fatalf("label change: %d %s", code, body)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		ns := readyNodes(t, kc, "workers")
		for _, n := range ns {
			if n.Labels["tier"] != "gold" {
				return false
			}
		}
		return len(ns) == 3
	}, "the label never reached every node")
	if got := machineNames(c.poolMachines(cl, "workers")); !slices.Equal(got, rolled) {
		t.Errorf("machines after a label change = %v, want unchanged %v", got, rolled)
	}
	if np, _ = c.nodePool(cl, "workers"); np.Status.ConfigHash == hashBefore {
		t.Errorf("config hash went back to the old one")
	}

	// 4. A machine that stops heartbeating is replaced by the MachineHealthCheck.
	victim := rolled[0]
	var m api.Machine
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/machines/"+victim+"/fault", `{"type":"`+api.FaultStopHeartbeats+`"}`, &m); code != http.StatusAccepted {
		t.Fatalf("fault: %d %s", code, body)
	}
	testenv.Eventually(t, poolRepair, func() bool {
		names := machineNames(c.poolMachines(cl, "workers"))
		np, _ = c.nodePool(cl, "workers")
		return !slices.Contains(names, victim) && len(names) == 3 && np.Status.ReadyReplicas == 3
	}, "machine %s was never remediated: %s\nmachines: %s", victim, lazyJSON{&np}, lazyJSON{c.poolMachines(cl, "workers")})

	// 5. An InPlace pool upgrades its machines without replacing them.
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"inplace","spec":{"replicas":2,
		"release":{"version":"`+oldRelease+`"},"management":{"upgradeType":"InPlace","inPlace":{"maxUnavailable":1}}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create inplace pool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "inplace", 2, poolReady)
	before := machineNames(c.poolMachines(cl, "inplace"))
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/inplace", `{"spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusOK {
		t.Fatalf("upgrade inplace pool: %d %s", code, body)
	}
	testenv.Eventually(t, poolRollout, func() bool {
		ns := readyNodes(t, kc, "inplace")
		for _, n := range ns {
			if n.Status.NodeInfo.KubeletVersion != "v"+newRelease || n.Spec.Unschedulable {
				return false
			}
		}
		np, _ = c.nodePool(cl, "inplace")
		return len(ns) == 2 && np.Status.Version == newRelease && np.Status.UpdatedReplicas == 2
	}, "in-place upgrade never finished: %s", lazyJSON{&np})
	if after := machineNames(c.poolMachines(cl, "inplace")); !slices.Equal(after, before) {
		t.Errorf("in-place upgrade replaced machines: %v → %v", before, after)
	}

	// 6. Scale to 0 with a PDB-protected pod: the drain waits for the PDB until
	// nodeDrainTimeout, then the machines go anyway.
	guardPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default", Labels: map[string]string{"app": "guarded"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{api.LabelNodePool: "workers"},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx(t), guardPod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}
	if _, err := kc.PolicyV1().PodDisruptionBudgets("default").Create(ctx(t), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pdb: %v", err)
	}
	var guardedNode string
	testenv.Eventually(t, 2*time.Minute, func() bool {
		p, err := kc.CoreV1().Pods("default").Get(ctx(t), "guarded", metav1.GetOptions{})
		guardedNode = p.Spec.NodeName
		return err == nil && p.Status.Phase == corev1.PodRunning && guardedNode != ""
	}, "the guarded pod never ran on a node of workers")
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/workers", `{"spec":{"replicas":0}}`, nil); code != http.StatusOK {
		t.Fatalf("scale to 0: %d %s", code, body)
	}
	scaledAt := time.Now()
	var heldUntil time.Time
	testenv.Eventually(t, poolRollout, func() bool {
		ms := c.poolMachines(cl, "workers")
		for _, m := range ms {
			if m.NodeName == guardedNode {
				heldUntil = time.Now()
			}
		}
		return len(ms) == 0
	}, "scale to 0 never finished: %s", lazyJSON{c.poolMachines(cl, "workers")})
	if held := heldUntil.Sub(scaledAt); held < 10*time.Second {
		t.Errorf("the guarded pod's machine went %s after the scale-down: the PDB did not hold the drain", held.Round(time.Second))
	}

	// 7. Deleting the pools leaves no machine, node or object.
	for _, pool := range []string{"workers", "inplace"} {
		if code, body := c.do("DELETE", "/v1/clusters/"+cl+"/nodepools/"+pool, "", nil); code != http.StatusAccepted {
			t.Fatalf("delete %s: %d %s", pool, code, body)
		}
	}
	testenv.Eventually(t, poolRollout, func() bool {
		_, c1 := c.nodePool(cl, "workers")
		_, c2 := c.nodePool(cl, "inplace")
		return c1 == http.StatusNotFound && c2 == http.StatusNotFound
	}, "the pools never went away")
	if ms := c.machines(cl); len(ms) != 0 {
		t.Errorf("machines left: %s", lazyJSON{ms})
	}
	if nodes, err := kc.CoreV1().Nodes().List(ctx(t), metav1.ListOptions{}); err != nil || len(nodes.Items) != 0 {
		t.Errorf("nodes left: %v %v", nodes, err)
	}
	assertNoPoolObjects(t, s, cl)
}

// assertNoPoolObjects checks the management cluster holds no object of a node pool of the
// cluster.
func assertNoPoolObjects(t *testing.T, s *dev.Stack, cluster string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Management.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := api.ControlPlaneNamespace(cluster)
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinesets"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinehealthchecks"},
		{Group: api.InfrastructureGroup, Version: api.InfrastructureVersion, Resource: "localmachines"},
		{Group: api.InfrastructureGroup, Version: api.InfrastructureVersion, Resource: "localmachinetemplates"},
		{Version: "v1", Resource: "secrets"},
	} {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Errorf("list %s: %v", gvr.Resource, err)
			continue
		}
		for _, o := range list.Items {
			if gvr.Resource == "secrets" && !strings.Contains(o.GetName(), "-userdata-") {
				continue // the cluster's own (kubeconfig) Secret stays until the cluster goes
			}
			t.Errorf("left behind: %s %s", gvr.Resource, o.GetName())
		}
	}
}
