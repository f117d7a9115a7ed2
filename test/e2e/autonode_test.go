package e2e

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// karpenterPools are what a cluster admin applies with kubectl: an on-demand amd64 NodePool
// and a spot one, both on Hostplane's default node class, consolidating after 10 s.
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
    consolidationPolicy: WhenEmptyOrUnderutilized
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
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 10s
    budgets: [{nodes: "100%"}]
`

// kubectl runs the kubectl on PATH against cluster's admin kubeconfig.
func (c *client) kubectl(cluster, stdin string, args ...string) (string, error) {
	c.t.Helper()
	code, kc := c.do("GET", "/v1/clusters/"+cluster+"/kubeconfig", "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("kubeconfig: %d %s", code, kc)
	}
	path := filepath.Join(c.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx(c.t), "kubectl", append([]string{"--kubeconfig", path}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
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

// cheapestHolding is the price of the cheapest on-demand amd64 type of the catalogue that
// holds pods asking for cpu in all.
func cheapestHolding(cpu resource.Quantity, pods int) float64 {
	best := -1.0
	for _, t := range api.LocalInstanceTypes() {
		if t.Architecture != "amd64" || int64(t.CPU)*1000 < cpu.MilliValue() || int(t.MaxPods) < pods {
			continue
		}
		if best < 0 || t.OnDemandPrice < best {
			best = t.OnDemandPrice
		}
	}
	return best
}

// placement maps each node to the CPU requests and count of the Running pods of app on it.
func placement(t *testing.T, kc *kubernetes.Clientset, app string) map[string]struct {
	cpu  resource.Quantity
	pods int
} {
	t.Helper()
	pods, err := kc.CoreV1().Pods("default").List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		cpu  resource.Quantity
		pods int
	}{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		e := out[p.Spec.NodeName]
		for _, ctr := range p.Spec.Containers {
			e.cpu.Add(ctr.Resources.Requests[corev1.ResourceCPU])
		}
		e.pods++
		out[p.Spec.NodeName] = e
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
	podsNeeding(t, kc, "batch", 2, "1", map[string]string{api.LabelCapacityType: api.CapacityTypeSpot})
	allRunning := func(app string, n int) func() bool {
		return func() bool {
			running, all := runningPods(t, kc, app)
			return all == n && running == n
		}
	}
	testenv.Eventually(t, scaleUp, allRunning("web", 20), "the 20 pods never all ran: machines %s", lazyJSON{c.autoNodes(cl)})
	testenv.Eventually(t, scaleUp, allRunning("batch", 2), "the spot pods never ran: machines %s", lazyJSON{c.autoNodes(cl)})

	nodes := c.autoNodes(cl)
	for node, use := range placement(t, kc, "web") {
		m, ok := nodes[node]
		switch {
		case !ok:
			t.Errorf("web pods run on %s, not a machine launched for a NodeClaim (machines %s)", node, lazyJSON{nodes})
		case m.CapacityType != api.CapacityTypeOnDemand:
			t.Errorf("machine %s of the on-demand NodePool is %s", m.Name, m.CapacityType)
		default:
			it, _ := api.LocalInstanceType(m.InstanceType)
			if want := cheapestHolding(use.cpu, use.pods); it.OnDemandPrice > want {
				t.Errorf("machine %s is %s ($%.2f/h) for %d pods of %s CPU; a $%.2f/h type holds them", m.Name, m.InstanceType, it.OnDemandPrice, use.pods, use.cpu.String(), want)
			}
		}
	}
	for node := range placement(t, kc, "batch") {
		if m := nodes[node]; m.CapacityType != api.CapacityTypeSpot {
			t.Errorf("spot pods run on %s, a %q machine %s", node, m.CapacityType, lazyJSON{m})
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
	testenv.Eventually(t, scaleDown, func() bool { return len(c.poolMachines(cl, api.AutoNodePoolName)) == 0 },
		"the empty Karpenter nodes were never consolidated: machines %s", lazyJSON{c.poolMachines(cl, api.AutoNodePoolName)})
	if out, err := c.kubectl(cl, "", "get", "nodeclaims", "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("NodeClaims left after consolidation: %v %s", err, out)
	}

	// 5. Deleting the cluster leaves no machine, process, port or key.
	podsNeeding(t, kc, "last", 1, "1", nil)
	testenv.Eventually(t, scaleUp, allRunning("last", 1), "the last pod never ran")
	got, _ := c.cluster(cl)
	endpoint := net.JoinHostPort(got.Status.ControlPlaneEndpoint.Host, strconv.Itoa(got.Status.ControlPlaneEndpoint.Port))
	if code, body := c.do("DELETE", "/v1/clusters/"+cl, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete: %d %s", code, body)
	}
	testenv.Eventually(t, poolReady, func() bool {
		_, code := c.cluster(cl)
		return code == http.StatusNotFound
	}, "the cluster never went away")
	assertNothingLeft(t, s, c, cl, endpoint)
}
