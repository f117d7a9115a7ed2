package bench

// The autoscaling benchmark of issue 12: pending pods → Running through an autoscaled pool
// (Karpenter's core and Hostplane's provider, the cluster's `karpenter` component) next to a
// fixed pool resized by hand to the size the autoscaler reached, in the same cluster of the
// same stack; then the autoscaler's RSS and CPU next to kube-scheduler's.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const (
	autoPods       = 50
	autoPodCPU     = "500m"
	autoRunTimeout = 6 * time.Minute
)

// BenchmarkAutoscaling_PendingPodsToRunning: one Available cluster (unneeded time 30 s) with
// two local.large pools (8 CPUs each). "auto" (autoScaling min 1, max 6) at 1 Ready node gets
// a Deployment of 50 pods of 500m selecting it (25 CPUs: 4 nodes); measured: Deployment
// create → all 50 Running, and the pool size the autoscaler reached. "manual" (replicas 1),
// the baseline, is PATCHed to that size at the same moment as its own 50-pod Deployment is
// created; measured: that moment → all 50 Running. The auto pods stay while the baseline runs
// (no scale-down during it). Then autoprovisioning (the cluster has spec.autoNode): a
// karpenter.sh NodePool allowing only on-demand local.large, and a third 50-pod Deployment
// selecting it; measured: create → all 50 Running, and the machines launched. At the end, the karpenter and kube-scheduler processes' RSS and
// CPU seconds (utime+stime since they started).
func BenchmarkAutoscaling_PendingPodsToRunning(b *testing.B) {
	karpenter := testenv.KarpenterBinary(b)
	_, c, _ := startPoolStack(b, func(cfg *dev.Config) { cfg.KarpenterBinary = karpenter })
	const cl = "bench-autoscale"
	body := `{"name":"` + cl + `","spec":{"release":{"version":"` + benchRelease + `"},"platform":{"type":"local"},` +
		`"controllerAvailabilityPolicy":"SingleReplica","autoscaling":{"scaleDown":{"unneededDurationSeconds":30}},` +
		`"autoNode":{"provisionerConfig":{"name":"Karpenter"}}}}`
	if code, resp, err := c.do(http.MethodPost, "/v1/clusters", body, nil); err != nil || code != http.StatusAccepted {
		b.Fatalf("create cluster: %d %s %v", code, resp, err)
	}
	b.Cleanup(func() {
		if err := c.deleteAll([]string{cl}); err != nil {
			b.Error(err)
		}
	})
	if _, err := c.waitAvailable(cl, availableTimeout); err != nil {
		b.Fatal(err)
	}
	kc := guestClient(b, c, cl)

	pool := func(name, sizing string) string {
		return fmt.Sprintf(`{"name":%q,"spec":{%s,"release":{"version":%q},`+
			`"platform":{"type":"local","local":{"instanceType":"local.large"}},"management":{"upgradeType":"Replace"}}}`,
			name, sizing, benchRelease)
	}
	for _, p := range []struct{ name, body string }{
		{"auto", pool("auto", `"autoScaling":{"min":1,"max":6}`)},
		{"manual", pool("manual", `"replicas":1`)},
	} {
		if code, resp, err := c.do(http.MethodPost, "/v1/clusters/"+cl+"/nodepools", p.body, nil); err != nil || code != http.StatusAccepted {
			b.Fatalf("create nodepool %s: %d %s %v", p.name, code, resp, err)
		}
	}
	for _, p := range []string{"auto", "manual"} {
		if _, err := c.waitPoolReady(cl, p, 1, poolReadyTimeout); err != nil {
			b.Fatal(err)
		}
	}
	// The autoscaler is up before the clock starts: its start is not what is measured.
	var karp, sched api.ReplicaStatus
	testenv.Eventually(b, 3*time.Minute, func() bool {
		karp, sched = replicaOf(c, cl, api.ComponentKarpenter), replicaOf(c, cl, api.ComponentScheduler)
		return karp.Ready && karp.Pid != 0 && sched.Pid != 0
	}, "the karpenter component never had a ready replica")
	karpCmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", karp.Pid))
	detail(b, "cluster Available, pools auto and manual at 1 Ready node; karpenter pid %d (%s), kube-scheduler pid %d; %s",
		karp.Pid, strings.ReplaceAll(string(karpCmd), "\x00", " "), sched.Pid, loadAverage())

	b.ResetTimer()

	// 1. Autoscaled.
	karpCPU0, _ := cpuSeconds(strconv.Itoa(karp.Pid))
	schedCPU0, _ := cpuSeconds(strconv.Itoa(sched.Pid))
	load := readCPU()
	t0 := time.Now()
	createPods(b, kc, "load-auto", map[string]string{api.LabelNodePool: "auto"})
	var firstScale time.Duration
	var maxTarget int32
	autoTook, err := waitRunning(kc, "load-auto", autoRunTimeout, func() {
		if np, code, err := c.pool(cl, "auto"); err == nil && code == http.StatusOK && np.Status.Autoscaling != nil {
			t := np.Status.Autoscaling.TargetReplicas
			if t > 1 && firstScale == 0 {
				firstScale = time.Since(t0)
			}
			maxTarget = max(maxTarget, t)
		}
	}, t0)
	if err != nil {
		np, _, _ := c.pool(cl, "auto")
		b.Fatalf("%v; pool auto: replicas %d ready %d autoscaling %+v", err, np.Status.Replicas, np.Status.ReadyReplicas, np.Status.Autoscaling)
	}
	autoLoad := load.machine()
	karpCPU1, _ := cpuSeconds(strconv.Itoa(karp.Pid))
	schedCPU1, _ := cpuSeconds(strconv.Itoa(sched.Pid))
	np, _, _ := c.pool(cl, "auto")
	reached := int(np.Status.ReadyReplicas)
	if np.Status.Autoscaling != nil {
		reached = max(reached, int(np.Status.Autoscaling.TargetReplicas))
	}
	autoNodes := nodesOf(b, kc, "auto")
	detail(b, "autoscaled: %d pods Running %s after the Deployment's create; first scale-up seen in the pool's status after %s; "+
		"pool at all-Running: replicas %d, ready %d, target %d (max target seen %d), Ready guest nodes %d; "+
		"karpenter used %.1f CPU-s and kube-scheduler %.1f CPU-s meanwhile; %s",
		autoPods, autoTook.Round(time.Millisecond), firstScale.Round(time.Millisecond), np.Status.Replicas, np.Status.ReadyReplicas,
		targetOf(np), maxTarget, autoNodes, karpCPU1-karpCPU0, schedCPU1-schedCPU0, autoLoad)

	// 2. Manual baseline: resize to the autoscaler's size and create the pods at once.
	size := reached
	if size < 2 {
		size = 4
	}
	load = readCPU()
	t1 := time.Now()
	if code, resp, err := c.do(http.MethodPatch, "/v1/clusters/"+cl+"/nodepools/manual", fmt.Sprintf(`{"spec":{"replicas":%d}}`, size), nil); err != nil || code != http.StatusOK {
		b.Fatalf("patch nodepool manual: %d %s %v", code, resp, err)
	}
	createPods(b, kc, "load-manual", map[string]string{api.LabelNodePool: "manual"})
	manualTook, err := waitRunning(kc, "load-manual", autoRunTimeout, func() {}, t1)
	if err != nil {
		b.Fatal(err)
	}
	manualLoad := load.machine()
	detail(b, "manual baseline: PATCH replicas 1→%d and Deployment create → %d pods Running %s; Ready guest nodes of manual %d; %s",
		size, autoPods, manualTook.Round(time.Millisecond), nodesOf(b, kc, "manual"), manualLoad)

	// 3. Autoprovisioned: a karpenter.sh NodePool of local.large on-demand machines (the
	// machines of the other two runs), then pods that select it.
	b.StopTimer()
	applyKarpenterPool(b, c, cl, "bench", "local.large")
	b.StartTimer()
	load = readCPU()
	karpCPU2, _ := cpuSeconds(strconv.Itoa(karp.Pid))
	t2 := time.Now()
	createPods(b, kc, "load-autonode", map[string]string{"karpenter.sh/nodepool": "bench"})
	autoNodeTook, err := waitRunning(kc, "load-autonode", autoRunTimeout, func() {}, t2)
	if err != nil {
		b.Fatal(err)
	}
	karpCPU3, _ := cpuSeconds(strconv.Itoa(karp.Pid))
	autoNodeMachines := 0
	if ms, err := c.machines(cl); err == nil {
		for _, m := range ms {
			if m.NodePool == api.AutoNodePoolName && m.NodeClaim != "" {
				autoNodeMachines++
			}
		}
	}
	detail(b, "autoprovisioned: Deployment create → %d pods Running %s on %d machines launched for NodeClaims; karpenter used %.1f CPU-s meanwhile; %s",
		autoPods, autoNodeTook.Round(time.Millisecond), autoNodeMachines, karpCPU3-karpCPU2, load.machine())
	b.StopTimer()

	// 3. The autoscaler next to kube-scheduler, same cluster, since they started.
	if k := replicaOf(c, cl, api.ComponentKarpenter); k.Pid != karp.Pid || k.Restarts != karp.Restarts {
		detail(b, "karpenter replica changed during the run: pid %d→%d, restarts %d→%d", karp.Pid, k.Pid, karp.Restarts, k.Restarts)
		karp = k
	}
	karpRSS, err1 := rssKiB(strconv.Itoa(karp.Pid))
	karpCPU, err2 := cpuSeconds(strconv.Itoa(karp.Pid))
	schedRSS, err3 := rssKiB(strconv.Itoa(sched.Pid))
	schedCPU, err4 := cpuSeconds(strconv.Itoa(sched.Pid))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			b.Fatal(err)
		}
	}
	detail(b, "at the end: karpenter RSS %.0f MiB, %.1f CPU-s in the %s since it started; kube-scheduler RSS %.0f MiB, %.1f CPU-s in %s",
		float64(karpRSS)/1024, karpCPU, procAge(karp.Pid), float64(schedRSS)/1024, schedCPU, procAge(sched.Pid))

	b.ReportMetric(seconds(autoTook), "auto-running-s")
	b.ReportMetric(seconds(firstScale), "auto-first-scale-s")
	b.ReportMetric(float64(reached), "auto-nodes")
	b.ReportMetric(seconds(manualTook), "manual-running-s")
	b.ReportMetric(seconds(autoNodeTook), "autonode-running-s")
	b.ReportMetric(float64(autoNodeMachines), "autonode-machines")
	b.ReportMetric(float64(karpRSS)/1024, "karpenter-rss-MiB")
	b.ReportMetric(karpCPU, "karpenter-cpu-s")
	b.ReportMetric(float64(schedRSS)/1024, "scheduler-rss-MiB")
	b.ReportMetric(schedCPU, "scheduler-cpu-s")
	b.ReportMetric(0, "ns/op")
}

// guestClient is a client-go clientset of the guest, from the API's admin kubeconfig.
func guestClient(b *testing.B, c *client, cluster string) *kubernetes.Clientset {
	b.Helper()
	code, kc, err := c.do(http.MethodGet, "/v1/clusters/"+cluster+"/kubeconfig", "", nil)
	if err != nil || code != http.StatusOK {
		b.Fatalf("kubeconfig: %d %s %v", code, kc, err)
	}
	cs, err := kube.Clientset(kc)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// replicaOf is the first replica of the cluster's component (zero when there is none).
func replicaOf(c *client, cluster, component string) api.ReplicaStatus {
	comps, err := c.components(cluster)
	if err != nil {
		return api.ReplicaStatus{}
	}
	for _, comp := range comps {
		if comp.Name == component && len(comp.Status.Replicas) > 0 {
			return comp.Status.Replicas[0]
		}
	}
	return api.ReplicaStatus{}
}

func targetOf(np api.NodePool) int32 {
	if np.Status.Autoscaling == nil {
		return 0
	}
	return np.Status.Autoscaling.TargetReplicas
}

// createPods creates a Deployment of autoPods pause pods requesting autoPodCPU each, on the
// nodes with the selector's labels.
func createPods(b *testing.B, kc *kubernetes.Clientset, name string, selector map[string]string) {
	b.Helper()
	d := testenv.PauseDeployment(name, autoPods, autoPodCPU, selector)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kc.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create deployment %s: %v", name, err)
	}
}

// waitRunning polls (every 250 ms, calling each too) until autoPods pods of the Deployment
// are Running, and returns the time since t0 when that was first seen.
func waitRunning(kc *kubernetes.Clientset, name string, timeout time.Duration, each func(), t0 time.Time) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	running, all := 0, 0
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pods, err := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		cancel()
		if err == nil {
			running, all = 0, 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					all++
					if p.Status.Phase == corev1.PodRunning {
						running++
					}
				}
			}
			if running == autoPods && all == autoPods {
				return time.Since(t0), nil
			}
		}
		each()
		time.Sleep(250 * time.Millisecond)
	}
	return 0, fmt.Errorf("deployment %s: %d of %d pods Running after %s", name, running, all, timeout)
}

// nodesOf counts the guest's Ready nodes of the pool.
func nodesOf(b *testing.B, kc *kubernetes.Clientset, pool string) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: api.LabelNodePool + "=" + pool})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, nd := range nodes.Items {
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// procAge is how long ago the process started (/proc/<pid>/stat field 22 against
// /proc/uptime), rounded to a second; "?" when it cannot be read.
func procAge(pid int) string {
	st, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	up, err2 := os.ReadFile("/proc/uptime")
	i := strings.LastIndexByte(string(st), ')')
	if err1 != nil || err2 != nil || i < 0 {
		return "?"
	}
	f := strings.Fields(string(st[i+1:]))
	u := strings.Fields(string(up))
	if len(f) < 20 || len(u) < 1 {
		return "?"
	}
	start, err1 := strconv.ParseFloat(f[19], 64) // field 22: starttime, in clock ticks since boot
	now, err2 := strconv.ParseFloat(u[0], 64)
	if err1 != nil || err2 != nil {
		return "?"
	}
	return (time.Duration(now-start/clockTicks) * time.Second).String()
}

// applyKarpenterPool creates, in the guest, a karpenter.sh NodePool of on-demand machines of
// one instance type on Hostplane's default node class, retrying until Karpenter's CRDs are
// served.
func applyKarpenterPool(b *testing.B, c *client, cluster, name, instanceType string) {
	b.Helper()
	code, kc, err := c.do(http.MethodGet, "/v1/clusters/"+cluster+"/kubeconfig", "", nil)
	if err != nil || code != http.StatusOK {
		b.Fatalf("kubeconfig: %d %s %v", code, kc, err)
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		b.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{
				"nodeClassRef": map[string]any{"group": "karpenter.hostplane.dev", "kind": "HostplaneNodeClass", "name": "default"},
				"expireAfter":  "Never",
				"requirements": []any{
					map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
					map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []any{instanceType}},
				},
			}},
			"disruption": map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	testenv.Eventually(b, 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := dc.Resource(gvr).Create(ctx, np, metav1.CreateOptions{})
		return err == nil
	}, "the karpenter.sh NodePool %s could not be created", name)
	// Karpenter launches for a NodePool once it is Ready (its node class checked): not part
	// of what is measured.
	testenv.Eventually(b, 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := dc.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
				return true
			}
		}
		return false
	}, "the karpenter.sh NodePool %s never became Ready", name)
}
