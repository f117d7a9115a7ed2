package componentd_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// EnvRealKubeTest runs the TestComponentd_KubernetesRuntime_OnRealKubelets tests (make
// mgmt-kuberuntime-test, which make test runs after the other tests: it needs what make
// mgmt-test needs, and the management cluster's fixed names and addresses admit one cluster at
// a time).
const EnvRealKubeTest = "HOSTPLANE_MGMT_KUBERUNTIME_TEST"

// realMgmtNodes is the size of the management cluster the tests share: a HighlyAvailable
// control plane needs 3 nodes (its 3 etcd members must not share one), and losing one of
// them leaves 2 for etcd's quorum.
const realMgmtNodes = 3

// realMgmt is the management cluster the tests on real kubelets share: only one can run on
// a host at a time (fixed names and addresses), and starting one (the release images
// imported into every node) is a good part of each test's time. The tests run one after the
// other (never t.Parallel); each deletes its cluster's namespace when it ends. TestMain stops
// it.
var realMgmt struct {
	mu  sync.Mutex
	mc  *mgmtcluster.Cluster
	err error
	// images holds the versions of the releases whose images the nodes have: the newest
	// one's from the start, another's once a test asks for it.
	images map[string]bool
}

func TestMain(m *testing.M) {
	code := m.Run()
	realMgmt.mu.Lock()
	defer realMgmt.mu.Unlock()
	if realMgmt.mc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := realMgmt.mc.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stop the management cluster: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// realManagementCluster returns the shared management cluster, starting it on first use
// with the newest release's images. The images of releases (older ones a test upgrades from)
// are imported into its nodes first, once.
func realManagementCluster(t testing.TB, releases ...release.Release) *mgmtcluster.Cluster {
	t.Helper()
	if os.Getenv(EnvRealKubeTest) == "" {
		t.Skip("needs root and a real management cluster: run `make mgmt-kuberuntime-test`")
	}
	realMgmt.mu.Lock()
	defer realMgmt.mu.Unlock()
	if realMgmt.mc == nil && realMgmt.err == nil {
		realMgmt.mc, realMgmt.err = startRealManagementCluster(t)
		realMgmt.images = map[string]bool{release.Latest().Version: true}
	}
	if realMgmt.err != nil {
		t.Fatalf("management cluster: %v", realMgmt.err)
	}
	for _, rel := range releases {
		if realMgmt.images[rel.Version] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		begin := time.Now()
		err := withReleaseImages(rel, func(archives []string) error { return realMgmt.mc.ImportImages(ctx, archives...) })
		cancel()
		if err != nil {
			t.Fatalf("import the images of release %s into the management nodes: %v", rel.Version, err)
		}
		realMgmt.images[rel.Version] = true
		t.Logf("the %d images of release %s imported into the %d management nodes in %s",
			len(release.Components()), rel.Version, realMgmtNodes, time.Since(begin).Round(time.Millisecond))
	}
	return realMgmt.mc
}

// withReleaseImages calls f with the image archives of rel's cached binaries, written to a
// temporary directory for the call (mgmtcluster.ReleaseImages).
func withReleaseImages(rel release.Release, f func(archives []string) error) error {
	dir, err := os.MkdirTemp("", "hostplane-release-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archives, err := mgmtcluster.ReleaseImages(rel, dir)
	if err != nil {
		return err
	}
	return f(archives)
}

func startRealManagementCluster(t testing.TB) (_ *mgmtcluster.Cluster, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rel := release.Latest()
	var (
		mc    *mgmtcluster.Cluster
		begin time.Time
	)
	if err := withReleaseImages(rel, func(archives []string) (err error) {
		begin = time.Now()
		mc, err = mgmtcluster.Start(ctx, mgmtcluster.Config{Nodes: realMgmtNodes, Release: rel}, archives...)
		return err
	}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer scancel()
			if serr := mc.Stop(sctx); serr != nil {
				t.Logf("stop the management cluster after a failed start: %v", serr)
			}
		}
	}()
	if err := mc.WaitNodesReady(ctx); err != nil {
		return nil, err
	}
	// One volume per etcd member of every cluster the tests create (1 + 3 + 3): they are
	// retained, so a deleted cluster's volume is not bound again.
	if err := mc.AddHostPathVolumes(ctx, 7, "10Gi"); err != nil {
		return nil, err
	}
	t.Logf("management cluster with %d kubelet nodes Ready in %s", realMgmtNodes, time.Since(begin).Round(time.Millisecond))
	return mc, nil
}

// newRealKubeHarness starts infrad, pkid and a componentd on the kubernetes runtime against
// mc. When the test ends, after componentd stops, cluster's namespace is deleted (so the next
// test has the nodes to itself), and, if the test failed, its pods and their logs are logged.
func newRealKubeHarness(t testing.TB, mc *mgmtcluster.Cluster, cluster string, versions ...string) (*harness, kubernetes.Interface) {
	t.Helper()
	cs, err := mc.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := kuberuntime.Namespace(cluster)
	// Registered before the harness, so they run after componentd has stopped.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.Log(mc.DescribePods(ctx, ns, 12))
		}
	})
	h := newHarnessFor(t, versions...)
	h.StartInfrad()
	h.StartPKID()
	h.startComponentdWith(componentd.Config{Runtime: componentd.RuntimeKubernetes, Base: daemon.Base{ManagementKubeconfig: mc.KubeconfigPath}})
	return h, cs
}

// The kubernetes runtime on a management cluster whose kubelets run the pods: one hosted
// control plane (SingleReplica, the newest release) from images built FROM scratch around the
// cached release binaries, settled when its pods are really Ready. Then it hibernates (every
// pod gone, etcd's claim kept) and resumes, Available again with a ConfigMap written before.
func TestComponentd_KubernetesRuntime_OnRealKubelets_ControlPlanePodsBecomeAvailable(t *testing.T) {
	mc := realManagementCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rel := release.Latest()
	h, cs := newRealKubeHarness(t, mc, "real", rel.Version)
	created := time.Now()
	h.createCluster("real", rel.Version, api.SingleReplica)
	h.waitSettled("real", rel.Version)
	t.Logf("hosted control plane settled (every component Available from Ready pods) %s after create", time.Since(created).Round(time.Millisecond))
	pods, err := cs.CoreV1().Pods(kuberuntime.Namespace("real")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Logf("pod %s on %s at %s: %s", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase)
	}
	if rss, n, err := podsRSS(pods.Items); err != nil {
		t.Logf("resident memory of the control plane's pods: %v", err)
	} else {
		t.Logf("resident memory of the control plane's %d pods (cgroup memory.stat of each pod): %.0f MiB", n, float64(rss)/(1<<20))
	}

	// Hibernate: every workload scaled to 0, the records Hibernated once no pod is left; the
	// claim (etcd's data) stays. Then resume: the same data, Available from Ready pods.
	ns := kuberuntime.Namespace("real")
	guest := newGuestAPI(t, h, cs, "real")
	const before = "written-before-hibernation"
	guest.waitFor(ctx, t, "the guest API to store a ConfigMap", func(ctx context.Context, g kubernetes.Interface) error {
		return putConfigMap(ctx, g, before)
	})
	asleep := time.Now()
	h.setHibernation("real", true)
	waitUntil(ctx, t, "every control-plane pod gone and every component recorded Hibernated", func(ctx context.Context) (bool, string, error) {
		left, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		if len(left.Items) > 0 {
			return false, fmt.Sprintf("%d pods left, %s first", len(left.Items), left.Items[0].Name), nil
		}
		comps := h.componentsOf("real")
		for _, name := range componentNames {
			e, ok := comps[name]
			if !ok {
				return false, name + ": no record", nil
			}
			if c, _ := e.Value.Status.Conditions.Get(api.ConditionAvailable); c.Status != api.ConditionFalse || c.Reason != api.ReasonHibernated {
				return false, fmt.Sprintf("%s: Available %s/%s", name, c.Status, c.Reason), nil
			}
		}
		return true, "", nil
	})
	t.Logf("hibernated: every control-plane pod gone and every component recorded Hibernated %s after spec.hibernation.enabled=true",
		time.Since(asleep).Round(time.Millisecond))
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 || claims.Items[0].Status.Phase != corev1.ClaimBound {
		t.Fatalf("etcd's claim while hibernated: %+v, want one, Bound", claims.Items)
	}
	for comp, s := range mustStatus(ctx, t, mc, "real") {
		if s.Replicas != 0 {
			t.Errorf("%s: %d replicas while hibernated, want 0", comp, s.Replicas)
		}
	}

	woken := time.Now()
	h.setHibernation("real", false)
	apiserverAt := waitHeldUntilKubeAPIServerAvailable(ctx, t, h, cs, "real")
	t.Logf("waking: kube-apiserver's Deployment Available %s after spec.hibernation.enabled=false, kube-controller-manager and kube-scheduler held at 0 replicas until then",
		apiserverAt.Sub(woken).Round(time.Millisecond))
	h.waitSettled("real", rel.Version)
	t.Logf("resumed: every component Available from Ready pods %s after spec.hibernation.enabled=false (%s after kube-apiserver)",
		time.Since(woken).Round(time.Millisecond), time.Since(apiserverAt).Round(time.Millisecond))
	for comp, s := range mustStatus(ctx, t, mc, "real") {
		if want := int32(kuberuntime.Replicas(comp, api.SingleReplica)); s.Replicas != want || !s.Available {
			t.Errorf("%s once resumed: %d replicas, Available %v; want %d, Available", comp, s.Replicas, s.Available, want)
		}
	}
	guest.waitFor(ctx, t, "the ConfigMap written before hibernation", func(ctx context.Context, g kubernetes.Interface) error {
		_, err := g.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, before, metav1.GetOptions{})
		return err
	})
	t.Logf("the guest API reads the ConfigMap written before hibernation %s after resume", time.Since(woken).Round(time.Millisecond))
}

// waitHeldUntilKubeAPIServerAvailable waits, on a waking cluster, until kube-apiserver's
// Deployment is Available and returns when it saw it so. Until then kube-controller-manager's
// and kube-scheduler's Deployments must have 0 replicas, and their records must say Hibernated
// (not woken yet) or WaitingForDependencies, never that their replicas are not ready.
func waitHeldUntilKubeAPIServerAvailable(ctx context.Context, t *testing.T, h *harness, cs kubernetes.Interface, cluster string) time.Time {
	t.Helper()
	rt := kuberuntime.NewForClientset(cs)
	deadline := time.Now().Add(upTimeout)
	started, waiting := false, false // kube-apiserver scaled back; a record said WaitingForDependencies
	for {
		comps := h.componentsOf(cluster) // first: the hold, once released, is never taken again
		status, err := rt.Status(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if s := status[api.ComponentKubeAPIServer]; s.Available {
			if !started {
				t.Error("never saw kube-apiserver scaled back while it was not Available yet")
			}
			if !waiting {
				t.Log("no record said WaitingForDependencies (componentd did not record while kube-apiserver started)")
			}
			return time.Now()
		} else if s.Replicas > 0 {
			started = true
		}
		for _, c := range []string{api.ComponentControllerManager, api.ComponentScheduler} {
			if s := status[c]; s.Replicas != 0 {
				t.Fatalf("%s has %d replicas while kube-apiserver is not Available (%+v), want 0", c, s.Replicas, status[api.ComponentKubeAPIServer])
			}
			var cond api.Condition
			if e, ok := comps[c]; ok {
				cond, _ = e.Value.Status.Conditions.Get(api.ConditionAvailable)
			}
			switch cond.Reason {
			case api.ReasonHibernated:
			case componentd.ReasonWaitingForDependencies:
				if want := "waiting for kube-apiserver to be Available"; cond.Message != want {
					t.Errorf("%s held: Available %s, want %q", c, cond.Message, want)
				}
				waiting = true
			default:
				t.Errorf("%s held at 0 replicas: Available %s/%s: %s, want %s or %s", c, cond.Status, cond.Reason, cond.Message,
					api.ReasonHibernated, componentd.ReasonWaitingForDependencies)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver of %s not Available within %v: %+v", cluster, upTimeout, status[api.ComponentKubeAPIServer])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mustStatus is the kubernetes runtime's view of cluster's workloads.
func mustStatus(ctx context.Context, t *testing.T, mc *mgmtcluster.Cluster, cluster string) map[string]kuberuntime.ComponentStatus {
	t.Helper()
	cs, err := mc.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	status, err := kuberuntime.NewForClientset(cs).Status(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// controlPlanePods returns ns's pods that are not being deleted, by component.
func controlPlanePods(ctx context.Context, cs kubernetes.Interface, ns string) (map[string][]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			c := p.Labels[kuberuntime.LabelComponent]
			out[c] = append(out[c], p)
		}
	}
	return out, nil
}

// podReady reports whether p runs with its Ready condition True.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodesOf returns the distinct nodes pods run on, sorted.
func nodesOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
