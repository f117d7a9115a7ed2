package dev_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
)

// envMgmtDevTest runs TestDev_KubernetesRuntime_OnRealKubelets_… (make mgmt-dev-test, part of
// make test): it needs root, containerd, runc, the CNI plugins and the management release's
// kubelet, and the management cluster's fixed addresses admit one such cluster on a host at
// a time.
const envMgmtDevTest = "HOSTPLANE_MGMT_DEV_TEST"

// hostplane dev --runtime kubernetes: the management cluster has kubelet nodes, a cluster's
// control plane runs as their pods and becomes Available from the pods' readiness, its
// kubeconfig answers through infrad's balancer (which reaches the pods by the apiserver
// Service's name), a node pool's machine joins as a Ready node. The stack stops (nothing of
// the management cluster left on the host but its data) and starts again on the same data
// dir: the same cluster is Available again with the object written before, and its node is
// Ready again. Deleting the cluster removes its namespace and its etcd volume's data.
func TestDev_KubernetesRuntime_OnRealKubelets_ControlPlaneAsPodsServesAndSurvivesARestart(t *testing.T) {
	if os.Getenv(envMgmtDevTest) == "" {
		t.Skip("needs root and a management cluster with kubelet nodes: run `make mgmt-dev-test`")
	}
	rel := release.Latest()
	testenv.RequireBinaries(t, rel, release.Components()...)
	// Short: the nodes' containerd sockets live under it (unix socket paths are short).
	dir, err := os.MkdirTemp("", "hpdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := dev.Config{DataDir: dir, Runtime: componentd.RuntimeKubernetes, ManagementNodes: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	begin := time.Now()
	s := startConfig(t, cfg)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop(context.Background())
		}
	})
	waitReady(t, s)
	t.Logf("hostplane dev with a management cluster of 2 kubelet nodes ready %s after start", time.Since(begin).Round(time.Millisecond))
	c := apiClient(t, s)

	created := time.Now()
	body := fmt.Sprintf(`{"name":"demo","spec":{"release":{"version":%q},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`, rel.Version)
	if code, b, err := c.Raw(ctx, http.MethodPost, "/v1/clusters", []byte(body)); err != nil || code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s %v", code, b, err)
	}
	waitClusterAvailable(ctx, t, c, "demo", 4*time.Minute)
	t.Logf("cluster demo Available %s after create", time.Since(created).Round(time.Millisecond))
	mgmt := managementClient(t, s)
	nodeOf := controlPlanePods(ctx, t, mgmt, "demo")
	t.Logf("control-plane pods Running and Ready on the management nodes: %v", nodeOf)

	guest := guestClient(ctx, t, c, "demo")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}, Data: map[string]string{"written": "before"}}
	eventually(ctx, t, time.Minute, "the kubeconfig answers: a ConfigMap is written", func(ctx context.Context) error {
		_, err := guest.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})

	pooled := time.Now()
	poolBody := fmt.Sprintf(`{"name":"workers","spec":{"replicas":1,"release":{"version":%q},"management":{"upgradeType":"Replace"}}}`, rel.Version)
	if code, b, err := c.Raw(ctx, http.MethodPost, "/v1/clusters/demo/nodepools", []byte(poolBody)); err != nil || code != http.StatusAccepted {
		t.Fatalf("create node pool: %d %s %v", code, b, err)
	}
	node := waitPoolNodeReady(ctx, t, guest, "workers", "")
	t.Logf("node pool workers: node %s Ready %s after POST", node, time.Since(pooled).Round(time.Millisecond))

	s.Stop(ctx)
	stopped = true
	if left := hostNetns("hpdev"); len(left) > 0 {
		t.Errorf("network namespaces of the management cluster left after Stop: %v", left)
	}

	restarted := time.Now()
	s2 := startConfig(t, cfg)
	t.Cleanup(func() { s2.Stop(context.Background()) })
	waitReady(t, s2)
	c = apiClient(t, s2)
	waitClusterAvailable(ctx, t, c, "demo", 4*time.Minute)
	guest = guestClient(ctx, t, c, "demo")
	eventually(ctx, t, 2*time.Minute, "the ConfigMap written before the restart is served", func(ctx context.Context) error {
		got, err := guest.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
		if err == nil && got.Data["written"] != "before" {
			err = fmt.Errorf("data %v", got.Data)
		}
		return err
	})
	if again := waitPoolNodeReady(ctx, t, guest, "workers", node); again != node {
		t.Errorf("after the restart the pool's Ready node is %s, want %s", again, node)
	}
	t.Logf("after a restart on the same data dir: cluster Available, the ConfigMap served, node %s Ready, %s after the start",
		node, time.Since(restarted).Round(time.Millisecond))

	// Delete: the namespace goes, and so does the etcd member's volume with its data.
	mgmt = managementClient(t, s2)
	volumes := claimedVolumes(ctx, t, mgmt, api.ControlPlaneNamespace("demo"))
	if len(volumes) == 0 {
		t.Fatal("no PersistentVolume is bound to a claim of demo's etcd")
	}
	if code, b, err := c.Raw(ctx, http.MethodDelete, "/v1/clusters/demo", nil); err != nil || code != http.StatusAccepted {
		t.Fatalf("delete cluster: %d %s %v", code, b, err)
	}
	eventually(ctx, t, 3*time.Minute, "the cluster, its namespace and its etcd volume are gone", func(ctx context.Context) error {
		if _, err := c.GetCluster(ctx, "demo"); !client.IsNotFound(err) {
			return fmt.Errorf("GET the cluster: %v", err)
		}
		if _, err := mgmt.CoreV1().Namespaces().Get(ctx, api.ControlPlaneNamespace("demo"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace: %v", err)
		}
		for _, v := range volumes {
			if _, err := mgmt.CoreV1().PersistentVolumes().Get(ctx, v, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("volume %s: %v", v, err)
			}
			if _, err := os.Stat(dir + "/" + dev.ManagementClusterDir + "/volumes/" + v); !os.IsNotExist(err) {
				return fmt.Errorf("volume %s's directory: %v", v, err)
			}
		}
		return nil
	})
}

func waitReady(t *testing.T, s *dev.Stack) {
	t.Helper()
	eventually(context.Background(), t, 3*time.Minute, "the stack says healthy", func(context.Context) error {
		if code, m, _ := getJSON(t, s.URL()+"/healthz"); code != http.StatusOK {
			return fmt.Errorf("/healthz: %d %v", code, m)
		}
		return nil
	})
}

func apiClient(t *testing.T, s *dev.Stack) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Server: s.URL(), Token: s.AdminToken()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func managementClient(t *testing.T, s *dev.Stack) kubernetes.Interface {
	t.Helper()
	cs, err := s.Management.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// eventually calls f every second until it returns nil, failing the test with f's last
// error after timeout.
func eventually(ctx context.Context, t *testing.T, timeout time.Duration, what string, f func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		last = f(cctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
}

func waitClusterAvailable(ctx context.Context, t *testing.T, c *client.Client, name string, timeout time.Duration) {
	t.Helper()
	eventually(ctx, t, timeout, "cluster "+name+" Available", func(ctx context.Context) error {
		cl, err := c.GetCluster(ctx, name)
		if err != nil {
			return err
		}
		if !cl.Status.Conditions.IsTrue(api.ConditionAvailable) {
			cond, _ := cl.Status.Conditions.Get(api.ConditionAvailable)
			return fmt.Errorf("Available=%s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}

// controlPlanePods checks that every pod of cluster's control plane runs, Ready, on a
// management node, and returns each pod's node.
func controlPlanePods(ctx context.Context, t *testing.T, mgmt kubernetes.Interface, cluster string) map[string]string {
	t.Helper()
	pods, err := mgmt.CoreV1().Pods(api.ControlPlaneNamespace(cluster)).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{}
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if p.Status.Phase != corev1.PodRunning || !ready || !strings.HasPrefix(p.Spec.NodeName, "hpdev-n") {
			t.Errorf("pod %s: phase %s, ready %v, node %q", p.Name, p.Status.Phase, ready, p.Spec.NodeName)
		}
		nodeOf[p.Name] = p.Spec.NodeName
	}
	if len(pods.Items) < len(release.Components()) {
		t.Errorf("%d control-plane pods, want one per component (%d)", len(pods.Items), len(release.Components()))
	}
	return nodeOf
}

func guestClient(ctx context.Context, t *testing.T, c *client.Client, cluster string) *kubernetes.Clientset {
	t.Helper()
	kc, err := c.Kubeconfig(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// waitPoolNodeReady waits for a Ready node of pool (named want, when want is not empty) and
// returns its name.
func waitPoolNodeReady(ctx context.Context, t *testing.T, guest kubernetes.Interface, pool, want string) string {
	t.Helper()
	var name string
	eventually(ctx, t, 4*time.Minute, "a Ready node of pool "+pool, func(ctx context.Context) error {
		nodes, err := guest.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: api.LabelNodePool + "=" + pool})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && (want == "" || n.Name == want) {
					name = n.Name
					return nil
				}
			}
		}
		return fmt.Errorf("%d nodes, none Ready (want %q)", len(nodes.Items), want)
	})
	return name
}

// claimedVolumes are the PersistentVolumes bound to claims in namespace.
func claimedVolumes(ctx context.Context, t *testing.T, mgmt kubernetes.Interface, namespace string) []string {
	t.Helper()
	pvs, err := mgmt.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == namespace {
			out = append(out, pv.Name)
		}
	}
	return out
}

// hostNetns are the network namespaces under /run/netns whose names start with prefix.
func hostNetns(prefix string) []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
