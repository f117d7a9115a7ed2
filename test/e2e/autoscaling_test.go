package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// Time bounds of the autoscaling flows: a scale-up is Karpenter's batch window plus a machine
// boot and join; a scale-down is the unneeded time plus Karpenter's validation and a drain.
const (
	scaleUp   = 4 * time.Minute
	scaleDown = 5 * time.Minute
)

// podsNeeding creates a Deployment of n pods that each request cpu and, with selector, land
// only on nodes with those labels.
func podsNeeding(t *testing.T, kc *kubernetes.Clientset, name string, n int32, cpu string, selector map[string]string) {
	t.Helper()
	d := testenv.PauseDeployment(name, n, cpu, selector)
	if _, err := kc.AppsV1().Deployments("default").Create(ctx(t), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s: %v", name, err)
	}
}

// runningPods counts the Running pods of a Deployment created by podsNeeding.
func runningPods(t *testing.T, kc *kubernetes.Clientset, name string) (running, all int) {
	t.Helper()
	pods, err := kc.CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			all++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
	}
	return running, all
}

func scaleDeployment(t *testing.T, kc *kubernetes.Clientset, name string, n int32) {
	t.Helper()
	s, err := kc.AppsV1().Deployments("default").GetScale(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := kc.AppsV1().Deployments("default").UpdateScale(ctx(t), name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An autoscaled pool (min 1, max 4) grows when pods do not fit its nodes, through Karpenter's
// core and the pool's MachineDeployment, until every pod Runs; once the pods are gone it
// returns to min after the cluster's unneeded time. A pool at min 0 grows to one node for a
// pod that only it can hold.
func TestNodePool_Autoscaling_GrowsForPendingPodsAndShrinksToMin(t *testing.T) {
	s, c := stack(t)
	prom := startPrometheus(t, c) // the autoscaling dashboard through a real Prometheus, below
	const cl = "autoscale"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"},
		"autoscaling":{"scaleDown":{"unneededDurationSeconds":10}}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	kc := c.kubeClient(cl)

	// local.small nodes have 2 CPUs: one 1500m pod each.
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{
		"release":{"version":"`+newRelease+`"},"autoScaling":{"min":1,"max":4},
		"platform":{"type":"local","local":{"instanceType":"local.small"}},
		"management":{"upgradeType":"Replace"},"nodeDrainTimeout":"30s"}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "workers", 1, poolReady)

	// 1. Three pods that each need a node of their own: the pool grows to three, all Run.
	podsNeeding(t, kc, "load", 3, "1500m", map[string]string{api.LabelNodePool: "workers"})
	testenv.Eventually(t, scaleUp, func() bool {
		running, all := runningPods(t, kc, "load")
		return all == 3 && running == 3
	}, "the pool never grew for the pending pods: pool %s\nmachines %s", lazyJSON{c.poolOrZero(cl, "workers")}, lazyJSON{c.poolMachines(cl, "workers")})
	np := c.waitPoolReady(cl, "workers", 3, poolReady)
	if got := len(readyNodes(t, kc, "workers")); got != 3 {
		t.Errorf("ready nodes of workers = %d, want 3", got)
	}
	if np.Status.Replicas > 4 {
		t.Errorf("pool has %d machines, above its max 4", np.Status.Replicas)
	}
	if as := np.Status.Autoscaling; as == nil || as.TargetReplicas != 3 || as.LastScale == nil ||
		as.LastScale.To < 2 || !strings.Contains(as.LastScale.Reason, "NodeClaim") {
		t.Errorf("status.autoscaling = %s, want target 3 and a last scale-up for a NodeClaim", lazyJSON{np.Status.Autoscaling})
	}

	// 2. No pods: the nodes Karpenter added go after the unneeded time; min stays.
	scaleDeployment(t, kc, "load", 0)
	np = c.waitPoolReady(cl, "workers", 1, scaleDown)
	if as := np.Status.Autoscaling; as == nil || as.TargetReplicas != 1 || as.LastScale == nil || as.LastScale.To >= as.LastScale.From {
		t.Errorf("status.autoscaling = %s, want target 1 after a scale-down", lazyJSON{np.Status.Autoscaling})
	}
	testenv.Eventually(t, time.Minute, func() bool { return len(readyNodes(t, kc, "workers")) == 1 },
		"the pool's removed nodes stayed in the guest")

	// The autoscaling dashboard's panels have their series now (scale events up and down).
	assertDashboardsQueryExportedMetrics(t, c, "autoscaling.json")
	assertDashboardsInPrometheus(t, prom, map[string]string{"cluster": cl}, "autoscaling.json")
	prom.Stop()

	// 3. A pool at min 0 grows to one node for a pod that only it holds.
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"big","spec":{
		"release":{"version":"`+newRelease+`"},"autoScaling":{"min":0,"max":2},
		"platform":{"type":"local","local":{"instanceType":"local.large"}},
		"management":{"upgradeType":"Replace"},"nodeLabels":{"tier":"big"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool big: %d %s", code, body)
	}
	c.waitPoolReady(cl, "big", 0, poolReady)
	podsNeeding(t, kc, "bigpod", 1, "6", map[string]string{"tier": "big"})
	testenv.Eventually(t, scaleUp, func() bool {
		running, all := runningPods(t, kc, "bigpod")
		return all == 1 && running == 1
	}, "the pool at min 0 never grew for its pod: pool %s", lazyJSON{c.poolOrZero(cl, "big")})
	c.waitPoolReady(cl, "big", 1, poolReady)

	// 4. Deleting the cluster leaves no machine, process (the autoscaler's included) or key.
	var comps api.ComponentList
	if code, body := c.do("GET", "/v1/clusters/"+cl+"/components", "", &comps); code != http.StatusOK {
		t.Fatalf("components: %d %s", code, body)
	}
	ready := -1
	for _, comp := range comps.Items {
		if comp.Name == api.ComponentKarpenter {
			ready = comp.Status.ReadyReplicas
		}
	}
	if procs := processesMentioning(c.dataDir, filepath.Join("clusters", cl, "kubeconfigs", "karpenter")); ready != 1 || len(procs) != 1 {
		t.Errorf("the autoscaler component has %d ready replicas (-1: not listed) and processes %v, want 1 and 1", ready, procs)
	}
	deleteCluster(t, s, c, cl, poolReady)
}

// poolOrZero is the pool as the API shows it, for failure messages.
func (c *client) poolOrZero(cluster, name string) api.NodePool {
	np, _ := c.nodePool(cluster, name)
	return np
}
