package componentd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// A HighlyAvailable control plane on three real management nodes: its replicas spread (the
// runtime's required anti-affinity: etcd's 3 members on 3 nodes, the 2 replicas of each
// Deployment on 2), it becomes Available from Ready pods and its guest API answers. Then one
// node holding a kube-apiserver is cut off the network (its kubelet and containers keep
// running, unreachable, as on a failed host or a partition):
//
//   - the node lifecycle controller marks it NotReady after the management cluster's grace
//     period (16 s here, 40 s by default) and its pods not ready; the taint eviction
//     controller deletes them after their toleration (5 s here, 300 s by default);
//   - the Deployments' replicas are replaced on the node that had none (anti-affinity allows
//     no other), so kube-apiserver, kube-controller-manager and kube-scheduler run 2 Ready
//     replicas again;
//   - etcd keeps its quorum with the 2 surviving members. The lost member is not replaced:
//     a StatefulSet pod on an unreachable node stays Terminating until its kubelet confirms
//     (or the node is deleted), and the only node without a member is the lost one. This is
//     the intended answer: etcd's data is on the member's volume, and a member must come back
//     with it (or be removed and replaced, which nothing automates yet: docs/kubernetes-runtime.md);
//   - componentd reports etcd with 2 of 3 Ready replicas and every component Available, from
//     the pods' real status; the guest API, reached through the kube-apiserver Service's ready
//     endpoints, reads an object written before the loss and takes a new write.
//
// The node then comes back: its kubelet finishes deleting the evicted pods, the StatefulSet
// recreates the lost member there on its old volume, and it rejoins: 3 Ready members on 3
// nodes and the control plane settled, with both objects still there.
//
// The times logged (create → Available, cut → recovered, the longest the guest API or a
// component's Available condition was seen down, the control plane's resident memory) are the
// figures in BENCHMARKS.md.
func TestComponentd_KubernetesRuntime_OnRealKubelets_HighlyAvailableSpreadsAndSurvivesALostNode(t *testing.T) {
	mc := realManagementCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	rel := release.Latest()
	const name = "ha"
	h, cs := newRealKubeHarness(t, mc, name, rel.Version)
	ns := kuberuntime.Namespace(name)

	created := time.Now()
	h.createCluster(name, rel.Version, api.HighlyAvailable)
	h.waitSettled(name, rel.Version)
	t.Logf("HighlyAvailable control plane settled (every component Available and every replica Ready from the pods) %s after create",
		time.Since(created).Round(time.Millisecond))

	// Spread: no two replicas of a component share a node.
	want := map[string]int{api.ComponentEtcd: 3, api.ComponentKubeAPIServer: 2, api.ComponentControllerManager: 2, api.ComponentScheduler: 2}
	pods, err := controlPlanePods(ctx, cs, ns)
	if err != nil {
		t.Fatal(err)
	}
	var all []corev1.Pod
	for _, comp := range componentNames {
		nodes := nodesOf(pods[comp])
		t.Logf("%s: %d pods on %v", comp, len(pods[comp]), nodes)
		if len(pods[comp]) != want[comp] || len(nodes) != want[comp] {
			t.Errorf("%s: %d pods on nodes %v; want %d pods on %d different nodes", comp, len(pods[comp]), nodes, want[comp], want[comp])
		}
		all = append(all, pods[comp]...)
	}
	if rss, n, err := podsRSS(all); err != nil {
		t.Logf("resident memory of the control plane's pods: %v", err)
	} else {
		t.Logf("resident memory of the control plane's %d pods (cgroup memory.stat of each pod): %.0f MiB", n, float64(rss)/(1<<20))
	}

	// The guest API answers and keeps an object.
	guest := newGuestAPI(t, h, cs, name)
	const before, after = "written-before-the-node-loss", "written-after-the-node-loss"
	guest.waitFor(ctx, t, "the guest API to list namespaces and store a ConfigMap", func(ctx context.Context, g kubernetes.Interface) error {
		if _, err := g.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		return putConfigMap(ctx, g, before)
	})

	// Lose the node of a kube-apiserver replica.
	lost := pods[api.ComponentKubeAPIServer][0].Spec.NodeName
	var onLost []string
	for _, p := range all {
		if p.Spec.NodeName == lost {
			onLost = append(onLost, p.Name)
		}
	}
	lostNode := mc.NodeNamed(lost)
	if lostNode == nil {
		t.Fatalf("no management node %q", lost)
	}
	lostIndex := lostNode.Index
	probe := startAvailabilityProbe(ctx, h, guest, name)
	cut := time.Now()
	if err := mc.SetNodeLink(lostIndex, false); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			if err := mc.SetNodeLink(lostIndex, true); err != nil {
				t.Errorf("bring %s's link back: %v", lost, err)
			}
		}
	})
	t.Logf("cut %s off the network; its pods: %v", lost, onLost)
	waitNodeStatus(ctx, t, mc, lost, false)
	t.Logf("%s NotReady %s after the cut", lost, time.Since(cut).Round(time.Millisecond))

	// Recovered: the replacements Ready on the surviving nodes, etcd's quorum, componentd's
	// records saying so, and the guest API reading the old object and taking a new one.
	waitUntil(ctx, t, "the control plane to recover on the surviving nodes", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlanePods(ctx, cs, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		var notYet []string
		for _, comp := range componentNames {
			ready := 0
			for _, p := range pods[comp] {
				if podReady(&p) && p.Spec.NodeName != lost {
					ready++
				}
			}
			need := want[comp]
			if comp == api.ComponentEtcd {
				need = 2 // the quorum; the lost member waits for its node
			}
			if ready != need {
				notYet = append(notYet, fmt.Sprintf("%s %d/%d Ready pods off %s", comp, ready, need, lost))
			}
		}
		records := h.componentsOf(name)
		for _, comp := range componentNames {
			e, ok := records[comp]
			if !ok {
				notYet = append(notYet, comp+" has no record")
				continue
			}
			c := e.Value
			need := want[comp]
			if comp == api.ComponentEtcd {
				need = 2 // componentd must see the lost member
			}
			if !c.Status.Conditions.IsTrue(api.ConditionAvailable) || c.Status.ReadyReplicas != need {
				notYet = append(notYet, fmt.Sprintf("record %s Available=%v readyReplicas=%d (want %d)",
					comp, c.Status.Conditions.IsTrue(api.ConditionAvailable), c.Status.ReadyReplicas, need))
			}
		}
		if len(notYet) > 0 {
			return false, strings.Join(notYet, "; "), nil
		}
		if _, err := guest.do(ctx, func(ctx context.Context, g kubernetes.Interface) error {
			if _, err := g.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, before, metav1.GetOptions{}); err != nil {
				return err
			}
			return putConfigMap(ctx, g, after)
		}); err != nil {
			return false, "guest API: " + err.Error(), nil
		}
		return true, "", nil
	})
	recovered := time.Since(cut)
	seen := probe.stop()
	t.Logf("recovered %s after the cut: replicas Ready off %s, etcd at 2 of 3 members, every component Available in componentd's records, the guest API reads the object written before and takes a new one",
		recovered.Round(time.Millisecond), lost)
	t.Logf("during the loss, from the cut: %s", seen)

	// The node comes back, and with it the lost etcd member, on its own volume.
	back := time.Now()
	if err := mc.SetNodeLink(lostIndex, true); err != nil {
		t.Fatal(err)
	}
	restored = true
	waitNodeStatus(ctx, t, mc, lost, true)
	waitUntil(ctx, t, "the lost etcd member to rejoin and the control plane to settle", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlanePods(ctx, cs, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		var members []string
		ready := 0
		for _, p := range pods[api.ComponentEtcd] {
			members = append(members, fmt.Sprintf("%s@%s ready=%v", p.Name, p.Spec.NodeName, podReady(&p)))
			if podReady(&p) {
				ready++
			}
		}
		if ready != 3 || len(nodesOf(pods[api.ComponentEtcd])) != 3 {
			return false, "etcd: " + strings.Join(members, ", "), nil
		}
		if !settled(h.componentsOf(name), rel.Version) {
			return false, "componentd's records not settled", nil
		}
		return true, "", nil
	})
	t.Logf("link of %s back: the lost etcd member rejoined and the control plane settled %s later", lost, time.Since(back).Round(time.Millisecond))
	guest.waitFor(ctx, t, "both objects through the guest API", func(ctx context.Context, g kubernetes.Interface) error {
		for _, n := range []string{before, after} {
			if _, err := g.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// guestAPI reaches a hosted cluster's kube-apiserver as a load balancer in front of the
// Service "kube-apiserver" would: through the Service's ready endpoints (pod addresses the
// host routes to), each tried in turn, with the admin kubeconfig's credentials.
type guestAPI struct {
	mgmt kubernetes.Interface
	ns   string
	base *rest.Config

	mu      sync.Mutex
	clients map[string]kubernetes.Interface // by endpoint address
}

func newGuestAPI(t *testing.T, h *harness, mgmt kubernetes.Interface, cluster string) *guestAPI {
	t.Helper()
	kc := h.AdminKubeconfig(cluster)
	if kc == nil {
		t.Fatalf("cluster %s has no admin kubeconfig", cluster)
	}
	base, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	// The serving certificate names the in-cluster names (pkid always adds this one); the
	// kubeconfig's own endpoint is the local platform's, where nothing of this runtime listens.
	base.TLSClientConfig.ServerName = "kubernetes.default.svc"
	base.Timeout = 3 * time.Second
	return &guestAPI{mgmt: mgmt, ns: kuberuntime.Namespace(cluster), base: base, clients: map[string]kubernetes.Interface{}}
}

// do runs f against each ready endpoint of the Service until one succeeds, and says which.
func (g *guestAPI) do(ctx context.Context, f func(context.Context, kubernetes.Interface) error) (string, error) {
	list, err := g.mgmt.DiscoveryV1().EndpointSlices(g.ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + kuberuntime.APIServerService,
	})
	if err != nil {
		return "", fmt.Errorf("endpoints: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				c, err := g.client(addr)
				if err != nil {
					return "", err
				}
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err = f(actx, c)
				cancel()
				if err == nil {
					return addr, nil
				}
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			}
		}
	}
	if len(errs) == 0 {
		return "", errors.New("no ready endpoint")
	}
	return "", errors.Join(errs...)
}

func (g *guestAPI) client(addr string) (kubernetes.Interface, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[addr]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(g.base)
	cfg.Host = "https://" + addr + ":" + strconv.Itoa(kuberuntime.APIServerPort)
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	g.clients[addr] = c
	return c, nil
}

// waitFor polls f through the guest API until it succeeds.
func (g *guestAPI) waitFor(ctx context.Context, t *testing.T, what string, f func(context.Context, kubernetes.Interface) error) {
	t.Helper()
	waitUntil(ctx, t, what, func(ctx context.Context) (bool, string, error) {
		if _, err := g.do(ctx, f); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// putConfigMap creates (or leaves) a ConfigMap in the guest's default namespace.
func putConfigMap(ctx context.Context, g kubernetes.Interface, name string) error {
	_, err := g.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"written": time.Now().UTC().Format(time.RFC3339Nano)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

const probeEvery = 500 * time.Millisecond

// availability is what an availabilityProbe saw.
type availability struct {
	samples, apiFailures, unavailable int
	apiLongest, unavailableLongest    time.Duration
	lastUnavailable, lastAPIError     string
}

func (a availability) String() string {
	s := fmt.Sprintf("%d samples every %s: guest API through ready endpoints failed %d times, longest %s",
		a.samples, probeEvery, a.apiFailures, a.apiLongest.Round(time.Millisecond))
	if a.apiFailures > 0 {
		s += " (last " + a.lastAPIError + ")"
	}
	s += fmt.Sprintf("; a component's record not Available %d times, longest %s", a.unavailable, a.unavailableLongest.Round(time.Millisecond))
	if a.unavailable > 0 {
		s += " (" + a.lastUnavailable + ")"
	}
	return s
}

type availabilityProbe struct {
	cancel context.CancelFunc
	done   chan availability
}

// startAvailabilityProbe samples, every probeEvery until stop, whether the guest API lists
// namespaces through a ready endpoint and whether componentd's records say every component
// is Available, and keeps the longest run of failures of each.
func startAvailabilityProbe(ctx context.Context, h *harness, guest *guestAPI, cluster string) *availabilityProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &availabilityProbe{cancel: cancel, done: make(chan availability, 1)}
	go func() {
		var a availability
		var apiDownSince, unavailableSince time.Time
		start := time.Now()
		for {
			now := time.Now()
			a.samples++
			if _, err := guest.do(ctx, func(ctx context.Context, g kubernetes.Interface) error {
				_, err := g.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				return err
			}); err != nil && ctx.Err() == nil {
				a.apiFailures++
				a.lastAPIError = fmt.Sprintf("at +%s: %v", time.Since(start).Round(time.Millisecond), err)
				if apiDownSince.IsZero() {
					apiDownSince = now
				}
				a.apiLongest = max(a.apiLongest, time.Since(apiDownSince))
			} else {
				apiDownSince = time.Time{}
			}
			// The records are read directly (componentsOf would fail the test from here).
			list, err := h.components.List(ctx, cluster+".*")
			var down []string
			for _, e := range list {
				if !e.Value.Status.Conditions.IsTrue(api.ConditionAvailable) {
					down = append(down, e.Value.Name)
				}
			}
			if err == nil && len(down) > 0 {
				a.unavailable++
				a.lastUnavailable = "last: " + strings.Join(down, ", ")
				if unavailableSince.IsZero() {
					unavailableSince = now
				}
				a.unavailableLongest = max(a.unavailableLongest, time.Since(unavailableSince))
			} else {
				unavailableSince = time.Time{}
			}
			select {
			case <-ctx.Done():
				p.done <- a
				return
			case <-time.After(probeEvery):
			}
		}
	}()
	return p
}

func (p *availabilityProbe) stop() availability {
	p.cancel()
	return <-p.done
}

// waitUntil polls cond every 500 ms for up to 5 minutes; on timeout the test fails with
// cond's last description.
func waitUntil(ctx context.Context, t testing.TB, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := kwait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, desc, err := cond(ctx)
		last = desc
		return ok, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// waitNodeStatus waits until node's Ready condition is True (ready) or anything else.
func waitNodeStatus(ctx context.Context, t *testing.T, mc *mgmtcluster.Cluster, node string, ready bool) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := mc.WaitNodeReady(wctx, node, ready); err != nil {
		t.Fatal(err)
	}
}

// podsRSS sums the resident memory of pods from their cgroups (cgroup v1: memory.stat
// total_rss of the pod's cgroup under a node's cgroup root, which counts every container and
// the sandbox; cgroup v2: anon) and says how many pods it found.
func podsRSS(pods []corev1.Pod) (int64, int, error) {
	_, key := memoryCgroupRoot()
	var sum int64
	found := 0
	for _, p := range pods {
		dir, err := podCgroup(p)
		if err != nil {
			return 0, 0, err
		}
		v, err := statValue(filepath.Join(dir, "memory.stat"), key)
		if err != nil {
			return 0, 0, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		sum += v
		found++
	}
	return sum, found, nil
}

// memoryCgroupRoot is where the memory controller's cgroups are, and the key of memory.stat
// that counts a cgroup's resident anonymous memory (total_rss on cgroup v1, anon on v2).
func memoryCgroupRoot() (root, key string) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "/sys/fs/cgroup", "anon"
	}
	return "/sys/fs/cgroup/memory", "total_rss"
}

// podCgroup is the directory of p's cgroup in the memory hierarchy, under a node's cgroup
// root (kubepods/pod<uid>, or kubepods/<qos>/pod<uid>); its containers' cgroups are below it.
func podCgroup(p corev1.Pod) (string, error) {
	root, _ := memoryCgroupRoot()
	pod := "pod" + string(p.UID)
	var dirs []string
	for _, pattern := range []string{filepath.Join(root, "*", "kubepods", pod), filepath.Join(root, "*", "kubepods", "*", pod)} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return "", err
		}
		dirs = append(dirs, m...)
	}
	if len(dirs) != 1 {
		return "", fmt.Errorf("pod %s: %d cgroups %v under %s", p.Name, len(dirs), dirs, root)
	}
	return dirs[0], nil
}

// statValue reads one key of a cgroup memory.stat file.
func statValue(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
