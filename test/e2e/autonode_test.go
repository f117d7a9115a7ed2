package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
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

// karpenterPools are what a cluster admin applies with kubectl: an on-demand amd64 NodePool,
// a tainted spot one, and one asking for an instance type the local platform does not have, both on Hostplane's default node class, removing empty nodes after
// 10 s (WhenEmpty, so that nodes stay put while the test looks at them).
const karpenterPools = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.hostplane.dev, kind: HostplaneNodeClass, name: default}
      expireAfter: Never
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10s
    budgets: [{nodes: "100%"}]
  limits: {cpu: "64"}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spot
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.hostplane.dev, kind: HostplaneNodeClass, name: default}
      expireAfter: Never
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      taints: [{key: spot, value: "true", effect: NoSchedule}]
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10s
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: impossible
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.hostplane.dev, kind: HostplaneNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
`

// kubectl runs the kubectl on PATH against cluster's admin kubeconfig.
func (c *client) kubectl(cluster, stdin string, args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.CommandContext(ctx(c.t), "kubectl", append([]string{"--kubeconfig", c.kubeconfigFile(cluster)}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kubeconfigFile writes the cluster's admin kubeconfig into a temp file (mode 0600) for
// kubectl and returns its path.
func (c *client) kubeconfigFile(cluster string) string {
	c.t.Helper()
	code, kc := c.do("GET", "/v1/clusters/"+cluster+"/kubeconfig", "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("kubeconfig: %d %s", code, kc)
	}
	path := filepath.Join(c.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// autoNodes are the machines of the cluster Karpenter launched for NodeClaims, by node name.
func (c *client) autoNodes(cluster string) map[string]api.Machine {
	out := map[string]api.Machine{}
	for _, m := range c.machines(cluster) {
		if m.NodePool == api.AutoNodePoolName && m.NodeClaim != "" {
			out[m.NodeName] = m
		}
	}
	return out
}

// nodeClaim is what the test reads of a karpenter.sh NodeClaim.
type nodeClaim struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Requirements []struct {
			Key      string   `json:"key"`
			Operator string   `json:"operator"`
			Values   []string `json:"values"`
		} `json:"requirements"`
	} `json:"spec"`
	Status struct {
		NodeName string `json:"nodeName"`
	} `json:"status"`
}

// nodeClaims lists the guest's NodeClaims with kubectl.
func (c *client) nodeClaims(cluster string) []nodeClaim {
	c.t.Helper()
	out, err := c.kubectl(cluster, "", "get", "nodeclaims", "-o", "json")
	if err != nil {
		c.t.Fatalf("kubectl get nodeclaims: %v: %s", err, out)
	}
	var list struct {
		Items []nodeClaim `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		c.t.Fatalf("nodeclaims: %v", err)
	}
	return list.Items
}

// cheapestAllowed is the lowest price among the instance types a NodeClaim allows (Karpenter
// narrows them to those that hold its pods) for capacity type ct.
func (nc nodeClaim) cheapestAllowed(ct string) float64 {
	best := -1.0
	for _, r := range nc.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable || r.Operator != string(corev1.NodeSelectorOpIn) {
			continue
		}
		for _, name := range r.Values {
			t, ok := api.LocalInstanceType(name)
			if !ok {
				continue
			}
			price := t.OnDemandPrice
			if ct == api.CapacityTypeSpot {
				price = t.SpotPrice
			}
			if best < 0 || price < best {
				best = price
			}
		}
	}
	return best
}

// podNodes are the nodes the Running pods of app are on.
func podNodes(t *testing.T, kc *kubernetes.Clientset, app string) map[string]bool {
	t.Helper()
	pods, err := kc.CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = true
		}
	}
	return out
}

// Autoprovisioning: with spec.autoNode on, a cluster admin's karpenter.sh NodePools (applied
// with kubectl) get machines for pending pods, of the cheapest local type that fits, spot
// only where asked; a control-plane upgrade drifts them onto the new release; with no pods
// they are consolidated away; deleting the cluster leaves nothing.
func TestAutoNode_KarpenterLaunchesFittingMachinesDriftsThemOnUpgradeAndConsolidates(t *testing.T) {
	s, c := stack(t)
	const cl = "autonode"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+oldRelease+`"},
		"autoNode":{"provisionerConfig":{"name":"Karpenter"}}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	// Bad input first: another provisioner, and autoNode off platform local.
	for _, bad := range []struct{ body, field string }{
		{`{"name":"bad1","spec":{"release":{"version":"` + newRelease + `"},"autoNode":{"provisionerConfig":{"name":"ClusterAutoscaler"}}}}`, "spec.autoNode.provisionerConfig.name"},
		{`{"name":"bad2","spec":{"release":{"version":"` + newRelease + `"},"platform":{"type":"none"},"autoNode":{"provisionerConfig":{"name":"Karpenter"}}}}`, "spec.autoNode"},
	} {
		if code, body := c.do("POST", "/v1/clusters", bad.body, nil); code != http.StatusBadRequest || !strings.Contains(string(body), bad.field) {
			t.Errorf("create %s: %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	kc := c.kubeClient(cl)

	// The autonode pool is nodepoold's: it cannot be made, changed or deleted by hand.
	c.waitPoolReady(cl, api.AutoNodePoolName, 0, poolReady)
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/"+api.AutoNodePoolName, `{"replicas":3}`, nil); code != http.StatusConflict {
		t.Errorf("PATCH the autonode pool: %d %s, want 409", code, body)
	}
	if code, body := c.do("DELETE", "/v1/clusters/"+cl+"/nodepools/"+api.AutoNodePoolName, "", nil); code != http.StatusConflict {
		t.Errorf("DELETE the autonode pool: %d %s, want 409", code, body)
	}

	// 1. The admin's NodePools, applied once Karpenter has installed its CRDs.
	testenv.Eventually(t, scaleUp, func() bool {
		out, err := c.kubectl(cl, karpenterPools, "apply", "-f", "-")
		if err != nil {
			t.Logf("kubectl apply: %v: %s", err, out)
		}
		return err == nil
	}, "kubectl apply of the karpenter.sh NodePools never worked")

	// 2. Twenty pods of 500m and two spot pods of 1 CPU: each gets a machine Karpenter chose.
	podsNeeding(t, kc, "web", 20, "500m", nil)
	batch := testenv.PauseDeployment("batch", 2, "1", map[string]string{api.LabelCapacityType: api.CapacityTypeSpot})
	batch.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := kc.AppsV1().Deployments("default").Create(ctx(t), batch, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allRunning := func(app string, n int) func() bool {
		return func() bool {
			running, all := runningPods(t, kc, app)
			return all == n && running == n
		}
	}
	testenv.Eventually(t, scaleUp, allRunning("web", 20), "the 20 pods never all ran: machines %s", lazyJSON{c.autoNodes(cl)})
	testenv.Eventually(t, scaleUp, allRunning("batch", 2), "the spot pods never ran: machines %s", lazyJSON{c.autoNodes(cl)})

	// The NodePool no local type satisfies says so, and launches nothing for its pod.
	podsNeeding(t, kc, "nowhere", 1, "100m", map[string]string{"karpenter.sh/nodepool": "impossible"})
	testenv.Eventually(t, scaleUp, func() bool {
		evs, err := kc.CoreV1().Events("").List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=impossible,reason=NoCompatibleInstanceTypes"})
		return err == nil && len(evs.Items) > 0
	}, "the NodePool no local instance type satisfies never reported NoCompatibleInstanceTypes")

	nodes := c.autoNodes(cl)
	for node := range podNodes(t, kc, "web") {
		if m, ok := nodes[node]; !ok || m.CapacityType != api.CapacityTypeOnDemand {
			t.Errorf("web pods run on %s, not an on-demand machine launched for a NodeClaim (machines %s)", node, lazyJSON{nodes})
		}
	}
	for node := range podNodes(t, kc, "batch") {
		if m, ok := nodes[node]; !ok || m.CapacityType != api.CapacityTypeSpot {
			t.Errorf("spot pods run on %s, not a spot machine launched for a NodeClaim (machines %s)", node, lazyJSON{nodes})
		}
	}
	if running, all := runningPods(t, kc, "nowhere"); running != 0 || all != 1 {
		t.Errorf("the pod of the impossible NodePool: %d of %d Running, want 0 of 1", running, all)
	}
	// Each machine is the cheapest type its NodeClaim allows, in the capacity type it asks for.
	claims := c.nodeClaims(cl)
	if len(claims) != len(nodes) {
		t.Errorf("%d NodeClaims for %d machines: %s", len(claims), len(nodes), lazyJSON{claims})
	}
	for _, nc := range claims {
		m, ok := nodes[nc.Status.NodeName]
		if !ok || m.NodeClaim != nc.Metadata.Name {
			t.Errorf("NodeClaim %s (node %q) has no machine launched for it: machines %s", nc.Metadata.Name, nc.Status.NodeName, lazyJSON{nodes})
			continue
		}
		it, _ := api.LocalInstanceType(m.InstanceType)
		price := it.OnDemandPrice
		if m.CapacityType == api.CapacityTypeSpot {
			price = it.SpotPrice
		}
		if want := nc.cheapestAllowed(m.CapacityType); price != want {
			t.Errorf("machine %s is a %s %s at $%.3f/h; its NodeClaim allows one at $%.3f/h: %s", m.Name, m.CapacityType, m.InstanceType, price, want, lazyJSON{nc})
		}
		if nc.Metadata.Labels[api.LabelInstanceType] != m.InstanceType || nc.Metadata.Labels[api.LabelCapacityType] != m.CapacityType {
			t.Errorf("NodeClaim %s is labelled %s, machine %s is a %s %s", nc.Metadata.Name, lazyJSON{nc.Metadata.Labels}, m.Name, m.CapacityType, m.InstanceType)
		}
	}
	for _, m := range nodes {
		if m.Version != "v"+oldRelease {
			t.Errorf("machine %s runs %s, want v%s", m.Name, m.Version, oldRelease)
		}
	}

	// 3. A control-plane upgrade drifts every Karpenter node onto the new release.
	if code, body := c.do("PATCH", "/v1/clusters/"+cl, `{"spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("upgrade: %d %s", code, body)
	}
	testenv.Eventually(t, 2*scaleUp, func() bool {
		ms := c.autoNodes(cl)
		if len(ms) == 0 {
			return false
		}
		for _, m := range ms {
			if m.Version != "v"+newRelease {
				return false
			}
		}
		return allRunning("web", 20)() && allRunning("batch", 2)()
	}, "the Karpenter nodes never all moved to v%s with every pod Running: machines %s", newRelease, lazyJSON{c.autoNodes(cl)})

	// 4. No pods: the nodes are consolidated away.
	scaleDeployment(t, kc, "web", 0)
	scaleDeployment(t, kc, "batch", 0)
	scaleDeployment(t, kc, "nowhere", 0)
	testenv.Eventually(t, scaleDown, func() bool {
		return len(c.poolMachines(cl, api.AutoNodePoolName)) == 0 && len(c.nodeClaims(cl)) == 0
	}, "the empty Karpenter nodes were never consolidated: machines %s", lazyJSON{c.poolMachines(cl, api.AutoNodePoolName)})

	// 5. spec.autoscaling.maxNodesTotal 1: two pods that each need a local.xlarge of their
	// own get one machine; the other stays Pending.
	if code, body := c.do("PATCH", "/v1/clusters/"+cl, `{"spec":{"autoscaling":{"maxNodesTotal":1}}}`, nil); code != http.StatusOK {
		t.Fatalf("patch maxNodesTotal: %d %s", code, body)
	}
	podsNeeding(t, kc, "big", 2, "10", nil)
	testenv.Eventually(t, scaleUp, func() bool {
		running, _ := runningPods(t, kc, "big")
		return running == 1
	}, "no big pod ran: machines %s", lazyJSON{c.autoNodes(cl)})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if ms := c.poolMachines(cl, api.AutoNodePoolName); len(ms) > 1 {
			t.Fatalf("%d machines with maxNodesTotal 1: %s", len(ms), lazyJSON{ms})
		}
	}
	if running, all := runningPods(t, kc, "big"); running != 1 || all != 2 {
		t.Errorf("big pods: %d of %d Running, want 1 of 2 (the cluster is at maxNodesTotal)", running, all)
	}

	// 6. Deleting the cluster leaves no machine, process, port or key.
	deleteCluster(t, s, c, cl, poolReady)
}
