package mgmtcluster_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/hostplane/hostplane/pkg/mgmtcluster"
)

// EnvMgmtTest runs the test (make mgmt-test sets it after installing containerd, runc and
// the CNI plugins and building the kubelet).
const EnvMgmtTest = "HOSTPLANE_MGMT_TEST"

const (
	podserverImage = "hostplane.local/podserver:1"
	testNamespace  = "default"
)

func TestMgmtCluster_TwoKubeletNodes_SpreadPodsServeOnTheirOwnIPsAndMoveOffALostNode(t *testing.T) {
	if os.Getenv(EnvMgmtTest) == "" {
		t.Skip("needs root, containerd, runc, the CNI plugins and the kubelet: run `make mgmt-test`")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: network namespaces, mounts and cgroups (run make mgmt-test as root)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	cfg := mgmtcluster.Config{}
	// What a crashed earlier run left is undone first (Start does it too), so that the host
	// is compared with itself as it was without the cluster.
	if err := mgmtcluster.Cleanup(ctx, cfg); err != nil {
		t.Fatalf("cleaning up an earlier run: %v", err)
	}
	before := snapshotHost(t)
	archive := buildPodserver(ctx, t)

	begin := time.Now()
	c, err := mgmtcluster.Start(ctx, cfg, archive)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer scancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	t.Cleanup(stop)
	t.Logf("cluster started in %s", time.Since(begin).Round(time.Millisecond))

	if err := c.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("both nodes Ready %s after start", time.Since(begin).Round(time.Millisecond))
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the default service account", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().ServiceAccounts(testNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})

	nodeRange := map[string]string{}
	for _, n := range c.Nodes() {
		nodeRange[n.Name] = strings.TrimSuffix(n.PodCIDR, "0/24")
	}

	// Two replicas that may not share a node.
	created := time.Now()
	spread := deployment("spread", 2, true)
	if _, err := cs.AppsV1().Deployments(testNamespace).Create(ctx, spread, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitRunning(ctx, t, cs, "spread", 2)
	t.Logf("2 spread pods Running and Ready %s after the Deployment was created", time.Since(created).Round(time.Millisecond))
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("both spread pods on %s despite the required anti-affinity", pods[0].Spec.NodeName)
	}
	for _, p := range pods {
		if !strings.HasPrefix(p.Status.PodIP, nodeRange[p.Spec.NodeName]) {
			t.Errorf("pod %s on %s has IP %s, not from its node's range %s0/24", p.Name, p.Spec.NodeName, p.Status.PodIP, nodeRange[p.Spec.NodeName])
		}
		body := get(ctx, t, "http://"+p.Status.PodIP+":8080/")
		if !strings.Contains(body, "pod="+p.Name) || !strings.Contains(body, "node="+p.Spec.NodeName) {
			t.Errorf("pod %s at %s answered %q", p.Name, p.Status.PodIP, body)
		}
	}
	// Pod on one node to pod on the other.
	a, b := pods[0], pods[1]
	body := get(ctx, t, "http://"+a.Status.PodIP+":8080/fetch?url=http://"+b.Status.PodIP+":8080/")
	if !strings.Contains(body, "pod="+b.Name) {
		t.Errorf("pod %s (%s) fetching pod %s (%s) got %q", a.Name, a.Spec.NodeName, b.Name, b.Spec.NodeName, body)
	}

	// A Service in front of them, by its short name from a pod: the cluster's DNS (the
	// pod's resolv.conf search path, no kube-proxy: the name resolves to the pods).
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: testNamespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "spread"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := cs.CoreV1().Services(testNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if body := get(ctx, t, "http://"+a.Status.PodIP+":8080/fetch?url=http://spread:8080/"); !strings.Contains(body, "pod=spread-") {
		t.Errorf("pod %s fetching http://spread:8080/ got %q", a.Name, body)
	}

	// One replica without constraints; its node's kubelet dies.
	solo := deployment("solo", 1, false)
	if _, err := cs.AppsV1().Deployments(testNamespace).Create(ctx, solo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitRunning(ctx, t, cs, "solo", 1)[0]
	lost := nodeIndex(t, c, first.Spec.NodeName)
	killed := time.Now()
	if err := c.StopKubelet(ctx, lost); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(ctx, t, c, first.Spec.NodeName, false)
	notReady := time.Since(killed)
	moved := waitSoloAwayFrom(ctx, t, cs, first.Spec.NodeName)
	t.Logf("kubelet of %s stopped: NotReady after %s, pod %s Running on %s after %s",
		first.Spec.NodeName, notReady.Round(time.Millisecond), moved.Name, moved.Spec.NodeName, time.Since(killed).Round(time.Millisecond))
	if body := get(ctx, t, "http://"+moved.Status.PodIP+":8080/"); !strings.Contains(body, "pod="+moved.Name) {
		t.Errorf("the moved pod %s answered %q", moved.Name, body)
	}

	// The kubelet comes back; then the other node is cut off the network (its kubelet and
	// pods keep running, unreachable), and the pod moves back.
	if err := c.StartKubelet(ctx, lost); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(ctx, t, c, first.Spec.NodeName, true)
	cut := nodeIndex(t, c, moved.Spec.NodeName)
	cutAt := time.Now()
	if err := c.SetNodeLink(cut, false); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(ctx, t, c, moved.Spec.NodeName, false)
	notReady = time.Since(cutAt)
	back := waitSoloAwayFrom(ctx, t, cs, moved.Spec.NodeName)
	t.Logf("link of %s cut: NotReady after %s, pod %s Running on %s after %s",
		moved.Spec.NodeName, notReady.Round(time.Millisecond), back.Name, back.Spec.NodeName, time.Since(cutAt).Round(time.Millisecond))
	if body := get(ctx, t, "http://"+back.Status.PodIP+":8080/"); !strings.Contains(body, "pod="+back.Name) {
		t.Errorf("the pod %s answered %q", back.Name, body)
	}

	stopBegin := time.Now()
	stop()
	t.Logf("teardown took %s", time.Since(stopBegin).Round(time.Millisecond))
	if left := mgmtcluster.Leftovers(cfg); len(left) > 0 {
		t.Errorf("left on the host after Stop:\n  %s", strings.Join(left, "\n  "))
	}
	after := snapshotHost(t)
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if before[k] != after[k] {
			t.Errorf("host %s changed:\n before: %s\n  after: %s", k, before[k], after[k])
		}
	}
}

// waitNodeReady waits until node's Ready condition is True (ready) or anything else.
func waitNodeReady(ctx context.Context, t *testing.T, c *mgmtcluster.Cluster, node string, ready bool) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := c.WaitNodeReady(wctx, node, ready); err != nil {
		t.Fatal(err)
	}
}

// waitSoloAwayFrom waits for a Running, Ready solo pod on a node other than node.
func waitSoloAwayFrom(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	waitFor(ctx, t, "a solo pod Running on a node other than "+node, func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=solo"})
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, p := range list.Items {
			seen = append(seen, p.Name+"@"+p.Spec.NodeName+":"+string(p.Status.Phase))
			if p.Spec.NodeName != "" && p.Spec.NodeName != node && p.DeletionTimestamp == nil && running(&p) {
				found = p
				return true, "", nil
			}
		}
		return false, strings.Join(seen, ", "), nil
	})
	return found
}

func deployment(name string, replicas int32, spread bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	env := func(n, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	pod := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](2),
		Containers: []corev1.Container{{
			Name:            "server",
			Image:           podserverImage,
			ImagePullPolicy: corev1.PullNever,
			Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
			Env:             []corev1.EnvVar{env("POD_NAME", "metadata.name"), env("NODE_NAME", "spec.nodeName"), env("POD_IP", "status.podIP")},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1,
			},
		}},
	}
	if spread {
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRunning waits for n Running and Ready pods of app and returns them.
func waitRunning(ctx context.Context, t *testing.T, cs kubernetes.Interface, app string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	waitFor(ctx, t, fmt.Sprintf("%d Running %s pods", n, app), func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		out = out[:0]
		var seen []string
		for _, p := range list.Items {
			seen = append(seen, fmt.Sprintf("%s@%s:%s", p.Name, p.Spec.NodeName, p.Status.Phase))
			if running(&p) && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return len(out) == n, strings.Join(seen, ", "), nil
	})
	return out
}

// waitFor polls cond until it holds; on timeout the test fails with cond's last description.
func waitFor(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, desc, err := cond(ctx)
		last = desc
		return ok, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

func get(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	var body string
	waitFor(ctx, t, "GET "+url, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK, resp.Status + ": " + body, nil
	})
	return body
}

func nodeIndex(t *testing.T, c *mgmtcluster.Cluster, name string) int {
	t.Helper()
	n := c.NodeNamed(name)
	if n == nil {
		t.Fatalf("no node %q", name)
	}
	return n.Index
}

// buildPodserver builds testdata/podserver and packs it FROM scratch.
func buildPodserver(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "podserver")
	if err := mgmtcluster.BuildStatic(ctx, "testdata/podserver", bin); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "podserver.tar")
	img := mgmtcluster.Image{Ref: podserverImage, Files: []mgmtcluster.ImageFile{{Path: "/podserver", Source: bin}}, Entrypoint: []string{"/podserver"}}
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	return archive
}

// snapshotHost records, independently of the package under test, what a run must leave as
// it found it.
func snapshotHost(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	out := func(name string, args ...string) string {
		b, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return "error: " + err.Error() + ": " + string(b)
		}
		return string(b)
	}
	s["network namespaces"] = out("ip", "netns", "list")
	var links []string
	for _, l := range strings.Split(out("ip", "-o", "link", "show"), "\n") {
		// Other tests on the machine may add Docker's links meanwhile: ours and the CNI's only.
		if f := strings.Fields(l); len(f) > 1 && (strings.HasPrefix(f[1], "hpm") || strings.HasPrefix(f[1], "cni")) {
			links = append(links, strings.TrimSuffix(f[1], ":"))
		}
	}
	s["links"] = strings.Join(links, " ")
	for _, table := range []string{"filter", "nat", "mangle"} {
		var chains []string
		for _, l := range strings.Split(out("iptables", "-w", "5", "-t", table, "-S"), "\n") {
			if strings.HasPrefix(l, "-N KUBE-") || strings.HasPrefix(l, "-N CNI-") {
				chains = append(chains, l)
			}
		}
		s["iptables "+table+" chains"] = strings.Join(chains, "; ")
	}
	for _, k := range []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		b, _ := os.ReadFile("/proc/sys/" + k)
		s["sysctl "+k] = strings.TrimSpace(string(b))
	}
	paths := []string{"/var/lib/cni", "/var/log/pods", "/var/log/containers", "/run/containerd", "/run/netns"}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		paths = append(paths, filepath.Join(h, "kubepods"), filepath.Join(h, "k8s.io"))
	}
	for _, p := range paths {
		_, err := os.Lstat(p)
		s["exists "+p] = fmt.Sprint(err == nil)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var mps []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (strings.HasPrefix(f[4], "/run/netns") || strings.HasPrefix(f[4], "/var/lib/hostplane") || strings.HasPrefix(f[4], "/var/lib/cni") ||
			strings.HasPrefix(f[4], "/var/lib/kubelet") ||
			strings.HasPrefix(f[4], "/sys/fs/cgroup") || strings.HasPrefix(f[4], "/run/containerd")) {
			mps = append(mps, f[4])
		}
	}
	sort.Strings(mps)
	s["mount points"] = strings.Join(slices.Compact(mps), " ")
	return s
}
