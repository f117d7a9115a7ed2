package componentd_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
	"github.com/hostplane/hostplane/test/integration/stack"
)

func TestNew_KubernetesRuntimeWithoutManagementKubeconfig_IsAConfigError(t *testing.T) {
	_, err := componentd.New(componentd.Config{Base: daemon.Base{DataDir: t.TempDir()}, Runtime: componentd.RuntimeKubernetes})
	if !errors.Is(err, componentd.ErrNoManagementKubeconfig) || !strings.Contains(err.Error(), "--management-kubeconfig") {
		t.Errorf("New: %v, want %v naming the flag", err, componentd.ErrNoManagementKubeconfig)
	}
	_, err = componentd.New(componentd.Config{Base: daemon.Base{DataDir: t.TempDir()}, Runtime: "docker"})
	if !errors.Is(err, componentd.ErrUnsupportedRuntime) {
		t.Errorf("New with runtime docker: %v, want %v", err, componentd.ErrUnsupportedRuntime)
	}
}

// The management apiserver runs no kube-controller-manager and no kubelet: the workloads
// are stored but no pod ever runs, and a deleted namespace stays Terminating.
func TestComponentd_KubernetesRuntime_AppliesWorkloadsReportsThemUnavailableRollsOnUpgradeAndDeletes(t *testing.T) {
	mgmt := testenv.KubeAPIServer(t) // first: stopped after the daemons
	cs, err := kubernetes.NewForConfig(mgmt.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.StartInfrad()
	h.StartPKID()
	h.startComponentdWith(componentd.Config{Runtime: componentd.RuntimeKubernetes, Base: daemon.Base{ManagementKubeconfig: mgmt.KubeconfigPath}})

	var (
		mu     sync.Mutex
		events []string
	)
	sub, err := h.NATS.Conn.Subscribe("hostplane.evt.kube.component.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, m.Subject)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	sawEvent := func(verb string) bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range events {
			if strings.HasSuffix(s, ".component."+verb) {
				n++
			}
		}
		return n >= len(componentNames)
	}

	h.createCluster("kube", "1.33.13", api.SingleReplica)
	ns := kuberuntime.Namespace("kube")
	owned := metav1.ListOptions{LabelSelector: kuberuntime.LabelManagedBy + "=" + kuberuntime.ManagedBy + "," + kuberuntime.LabelCluster + "=kube"}

	// podHashes returns each component's pod-template config hash in the management cluster.
	podHashes := func() map[string]string {
		out := map[string]string{}
		deps, err := cs.AppsV1().Deployments(ns).List(h.Ctx, owned)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps.Items {
			out[d.Name] = d.Spec.Template.Annotations[kuberuntime.AnnotationConfigHash]
		}
		sts, err := cs.AppsV1().StatefulSets(ns).List(h.Ctx, owned)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sts.Items {
			out[s.Name] = s.Spec.Template.Annotations[kuberuntime.AnnotationConfigHash]
		}
		return out
	}
	// recorded reports whether every component is recorded at version with the config hash
	// its workload's pod template carries, and the autoscaler, without a workload (the
	// cluster has no autoscaled pool), at version too.
	recorded := func(version string) bool {
		comps, hashes := h.componentsOf("kube"), podHashes()
		if len(comps) != len(componentNames)+1 || len(hashes) != len(componentNames) {
			return false
		}
		if k, ok := comps[api.ComponentKarpenter]; !ok || k.Value.Spec.Version != version {
			return false
		}
		for _, name := range componentNames {
			c, ok := comps[name]
			if !ok || c.Value.Spec.Version != version || c.Value.Spec.ConfigHash == "" || c.Value.Spec.ConfigHash != hashes[name] {
				return false
			}
		}
		return true
	}
	testenv.Eventually(t, upTimeout, func() bool { return recorded("1.33.13") },
		"every component recorded with its workload's config hash")

	nsObj, err := cs.CoreV1().Namespaces().Get(h.Ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace: %v", err)
	}
	if l := nsObj.Labels; l[kuberuntime.LabelManagedBy] != kuberuntime.ManagedBy || l[kuberuntime.LabelCluster] != "kube" {
		t.Errorf("namespace %s labels %v", ns, l)
	}
	deps, err := cs.AppsV1().Deployments(ns).List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		if d.Labels[kuberuntime.LabelManagedBy] != kuberuntime.ManagedBy || d.Labels[kuberuntime.LabelCluster] != "kube" ||
			d.Labels[kuberuntime.LabelComponent] != d.Name {
			t.Errorf("Deployment %s labels %v", d.Name, d.Labels)
		}
		if *d.Spec.Replicas != 1 {
			t.Errorf("Deployment %s: %d replicas, want 1", d.Name, *d.Spec.Replicas)
		}
	}
	if len(deps.Items) != 3 {
		t.Errorf("%d Deployments, want kube-apiserver, kube-controller-manager and kube-scheduler", len(deps.Items))
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(h.Ctx, owned)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range secrets.Items {
		names[s.Name] = true
	}
	for _, want := range []string{kuberuntime.SecretEtcdServer, kuberuntime.SecretEtcdPeer, kuberuntime.SecretAPIServer, kuberuntime.SecretAdminKubeconfig,
		kuberuntime.SecretEncryptionConfig} {
		if !names[want] {
			t.Errorf("no Secret %s with the owner labels (have %v)", want, names)
		}
	}

	// No kubelet runs the pods: no component is Available, and the records say why.
	comps := h.componentsOf("kube")
	for _, name := range componentNames {
		c := comps[name].Value
		avail, _ := c.Status.Conditions.Get(api.ConditionAvailable)
		if avail.Status != api.ConditionFalse || avail.Reason != componentd.ReasonReplicasNotReady ||
			!strings.Contains(avail.Message, "0 of 1 replicas ready") {
			t.Errorf("%s Available = %+v, want False, %s, 0 of 1 replicas ready", name, avail, componentd.ReasonReplicasNotReady)
		}
		if c.Status.Conditions.IsTrue(api.ConditionRolloutComplete) || c.Status.ReadyReplicas != 0 || c.Spec.Replicas != 1 {
			t.Errorf("%s record %+v", name, c)
		}
	}
	testenv.Eventually(t, wait, func() bool { return sawEvent(componentd.VerbProgressing) }, "component.progressing of every component")

	// The autoscaler is idle, as under the process runtime: no workload, nothing missing.
	k := comps[api.ComponentKarpenter].Value
	for _, cond := range []string{api.ConditionAvailable, api.ConditionRolloutComplete} {
		if c, _ := k.Status.Conditions.Get(cond); c.Status != api.ConditionTrue || c.Reason != componentd.ReasonIdle {
			t.Errorf("the idle autoscaler's %s = %+v, want True, %s", cond, c, componentd.ReasonIdle)
		}
	}
	if k.Spec.Replicas != 0 || k.Status.ReadyReplicas != 0 {
		t.Errorf("the idle autoscaler: %+v; want 0 replicas", k)
	}

	// A release upgrade rolls kube-apiserver's pods (a new config hash), not etcd's.
	before := podHashes()
	h.upgrade("kube", "1.34.4")
	testenv.Eventually(t, wait, func() bool { return recorded("1.34.4") }, "every component recorded at 1.34.4")
	after := podHashes()
	if after[api.ComponentKubeAPIServer] == before[api.ComponentKubeAPIServer] {
		t.Errorf("kube-apiserver's config hash did not change on the upgrade (%s)", after[api.ComponentKubeAPIServer])
	}
	if after[api.ComponentEtcd] != before[api.ComponentEtcd] {
		t.Errorf("etcd's config hash changed on the upgrade (%s → %s)", before[api.ComponentEtcd], after[api.ComponentEtcd])
	}
	if g := h.componentsOf("kube")[api.ComponentKubeAPIServer].Value.Generation; g < 1 {
		t.Errorf("kube-apiserver record generation %d after the upgrade, want it bumped", g)
	}

	// Deletion removes the records and the workloads, though the namespace stays
	// Terminating without a namespace controller.
	h.MarkClusterDeleting("kube")
	testenv.Eventually(t, wait, func() bool { return len(h.componentsOf("kube")) == 0 }, "controlplane keys of kube deleted")
	if left := podHashes(); len(left) > 0 {
		t.Errorf("workloads left after deletion: %v", left)
	}
	if secrets, err := cs.CoreV1().Secrets(ns).List(h.Ctx, owned); err != nil || len(secrets.Items) > 0 {
		t.Errorf("Secrets left after deletion: %v (%v)", secrets, err)
	}
	testenv.Eventually(t, wait, func() bool { return sawEvent(componentd.VerbDeleted) }, "component.deleted of every component")
}

// The autoscaler follows the cluster's node pools under the kubernetes runtime too: its
// Deployment and identity appear with an autoscaled pool and go with it, and its record
// follows (one replica, not ready without a kubelet; then Idle).
func TestComponentd_KubernetesRuntime_RunsTheAutoscalerWhileAPoolAutoscales(t *testing.T) {
	h, cs := newKubeRuntimeHarness(t)
	const image = testKarpenterImage
	pools := stack.Bucket[api.NodePool](h.Env, bus.BucketNodePools)

	c := stack.Cluster("auto", "1.34.4", api.SingleReplica)
	c.Spec.Autoscaling = &api.ClusterAutoscaling{Scaling: api.ScaleUpOnly}
	h.CreateCluster(c)
	ns := kuberuntime.Namespace("auto")
	karpenter := func() *api.ControlPlaneComponent {
		if e, ok := h.componentsOf("auto")[api.ComponentKarpenter]; ok {
			return e.Value
		}
		return nil
	}
	idle := func() bool {
		k := karpenter()
		return k != nil && k.Spec.Replicas == 0 && k.Status.Conditions.IsTrue(api.ConditionAvailable) &&
			k.Status.Conditions.IsTrue(api.ConditionRolloutComplete)
	}
	testenv.Eventually(t, upTimeout, idle, "the autoscaler recorded idle")
	if _, err := cs.AppsV1().Deployments(ns).Get(h.Ctx, api.ComponentKarpenter, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("karpenter Deployment without an autoscaled pool: %v", err)
	}

	pool := &api.NodePool{ObjectMeta: api.ObjectMeta{Name: "workers"}, Cluster: "auto",
		Spec: api.NodePoolSpec{AutoScaling: &api.NodePoolAutoScaling{Min: 0, Max: 3}}}
	rev, err := pools.Create(h.Ctx, api.NodePoolKey("auto", "workers"), pool)
	if err != nil {
		t.Fatal(err)
	}
	h.PublishCluster("auto", "updated")
	var dep *appsv1.Deployment
	testenv.Eventually(t, wait, func() bool {
		dep, err = cs.AppsV1().Deployments(ns).Get(h.Ctx, api.ComponentKarpenter, metav1.GetOptions{})
		return err == nil
	}, "the karpenter Deployment applied once a pool autoscales")
	ctr := dep.Spec.Template.Spec.Containers[0]
	if ctr.Image != image || !slices.Contains(ctr.Args, "--scale-down=false") || !slices.Contains(ctr.Args, "--namespace="+ns) ||
		slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--management-kubeconfig") }) {
		t.Errorf("karpenter container %s %v", ctr.Image, ctr.Args)
	}
	for what, err := range map[string]error{
		"serviceaccount": getErr(cs.CoreV1().ServiceAccounts(ns).Get(h.Ctx, kuberuntime.KarpenterServiceAccount, metav1.GetOptions{})),
		"rolebinding":    getErr(cs.RbacV1().RoleBindings(ns).Get(h.Ctx, kuberuntime.KarpenterServiceAccount, metav1.GetOptions{})),
		"secret":         getErr(cs.CoreV1().Secrets(ns).Get(h.Ctx, kuberuntime.SecretKarpenterKubeconfig, metav1.GetOptions{})),
	} {
		if err != nil {
			t.Errorf("the autoscaler's %s: %v", what, err)
		}
	}
	// No kubelet: one replica wanted, none ready, recorded from the Deployment.
	testenv.Eventually(t, wait, func() bool {
		k := karpenter()
		avail, _ := k.Status.Conditions.Get(api.ConditionAvailable)
		return k.Spec.Replicas == 1 && k.Spec.ConfigHash == dep.Spec.Template.Annotations[kuberuntime.AnnotationConfigHash] &&
			avail.Status == api.ConditionFalse && avail.Reason == componentd.ReasonReplicasNotReady
	}, "the autoscaler recorded from its Deployment: 1 replica, not ready")

	if err := pools.Delete(h.Ctx, api.NodePoolKey("auto", "workers"), rev); err != nil {
		t.Fatal(err)
	}
	h.PublishCluster("auto", "updated")
	testenv.Eventually(t, wait, func() bool {
		for _, err := range []error{
			getErr(cs.AppsV1().Deployments(ns).Get(h.Ctx, api.ComponentKarpenter, metav1.GetOptions{})),
			getErr(cs.CoreV1().ServiceAccounts(ns).Get(h.Ctx, kuberuntime.KarpenterServiceAccount, metav1.GetOptions{})),
			getErr(cs.RbacV1().RoleBindings(ns).Get(h.Ctx, kuberuntime.KarpenterServiceAccount, metav1.GetOptions{})),
			getErr(cs.CoreV1().Secrets(ns).Get(h.Ctx, kuberuntime.SecretKarpenterKubeconfig, metav1.GetOptions{})),
		} {
			if !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	}, "the autoscaler's Deployment, ServiceAccount, Role, RoleBinding and Secret deleted with the last autoscaled pool")
	testenv.Eventually(t, wait, idle, "the autoscaler recorded idle again")
	if k := karpenter(); k != nil {
		for _, cond := range []string{api.ConditionAvailable, api.ConditionRolloutComplete} {
			if c, _ := k.Status.Conditions.Get(cond); c.Reason != componentd.ReasonIdle {
				t.Errorf("the autoscaler's %s = %+v, want reason %s", cond, c, componentd.ReasonIdle)
			}
		}
	}
	// The control plane's own workloads stayed.
	if deps, err := cs.AppsV1().Deployments(ns).List(h.Ctx, metav1.ListOptions{}); err != nil || len(deps.Items) != 3 {
		t.Errorf("Deployments after the autoscaler went: %v (%v)", deps, err)
	}
}

// testKarpenterImage is the autoscaler's image in the tests without kubelets: never pulled.
const testKarpenterImage = "hostplane/componentd:integration"

// newKubeRuntimeHarness starts a management kube-apiserver (no kube-controller-manager, no
// kubelet), infrad, pkid and a componentd on the kubernetes runtime against it, for the newest
// release, and returns the harness and a client of the management cluster.
func newKubeRuntimeHarness(t *testing.T) (*harness, kubernetes.Interface) {
	t.Helper()
	mgmt := testenv.KubeAPIServer(t) // first: stopped after the daemons
	cs, err := kubernetes.NewForConfig(mgmt.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessFor(t, "1.34.4")
	h.StartInfrad()
	h.StartPKID()
	h.startComponentdWith(componentd.Config{Runtime: componentd.RuntimeKubernetes, KarpenterImage: testKarpenterImage,
		Base: daemon.Base{ManagementKubeconfig: mgmt.KubeconfigPath}})
	return h, cs
}

// getErr keeps the error of a Get.
func getErr[T any](_ T, err error) error { return err }

// A cluster woken from hibernation starts etcd and kube-apiserver first: the dependents of
// kube-apiserver (kube-controller-manager, kube-scheduler, the autoscaler) stay at 0 replicas,
// recorded as waiting for it, until its Deployment is Available. No kubelet runs here, so
// kube-apiserver is made Available by writing its Deployment's status as the Deployment
// controller would.
func TestComponentd_KubernetesRuntime_AWakeHoldsKubeAPIServersDependentsAt0UntilItIsAvailable(t *testing.T) {
	h, cs := newKubeRuntimeHarness(t)
	c := stack.Cluster("nap", "1.34.4", api.SingleReplica)
	c.Spec.Autoscaling = &api.ClusterAutoscaling{Scaling: api.ScaleUpOnly}
	h.CreateCluster(c)
	pool := &api.NodePool{ObjectMeta: api.ObjectMeta{Name: "workers"}, Cluster: "nap",
		Spec: api.NodePoolSpec{AutoScaling: &api.NodePoolAutoScaling{Min: 0, Max: 3}}}
	if _, err := stack.Bucket[api.NodePool](h.Env, bus.BucketNodePools).Create(h.Ctx, api.NodePoolKey("nap", "workers"), pool); err != nil {
		t.Fatal(err)
	}
	h.PublishCluster("nap", "updated")
	ns := kuberuntime.Namespace("nap")
	dependents := []string{api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}
	rt := kuberuntime.NewForClientset(cs)
	workloads := func() map[string]kuberuntime.ComponentStatus {
		status, err := rt.Status(h.Ctx, "nap")
		if err != nil {
			t.Fatal(err)
		}
		return status
	}
	available := func(comp string) api.Condition {
		e, ok := h.componentsOf("nap")[comp]
		if !ok {
			return api.Condition{}
		}
		cond, _ := e.Value.Status.Conditions.Get(api.ConditionAvailable)
		return cond
	}
	// Created: every workload at once, the dependents included.
	testenv.Eventually(t, upTimeout, func() bool {
		w := workloads()
		for _, s := range w {
			if s.Replicas == 0 {
				return false
			}
		}
		return len(w) == 5
	}, "every workload, the autoscaler's included, applied with its replicas at create")

	h.setHibernation("nap", true)
	testenv.Eventually(t, wait, func() bool {
		for _, comp := range append(slices.Clone(componentNames), api.ComponentKarpenter) {
			if available(comp).Reason != api.ReasonHibernated {
				return false
			}
		}
		return true
	}, "every component recorded Hibernated")

	h.setHibernation("nap", false)
	testenv.Eventually(t, wait, func() bool {
		w := workloads()
		if w[api.ComponentEtcd].Replicas != 1 || w[api.ComponentKubeAPIServer].Replicas != 1 {
			return false
		}
		for _, comp := range dependents {
			if n := w[comp].Replicas; n != 0 {
				t.Fatalf("%s scaled to %d before kube-apiserver is Available: %+v", comp, n, w)
			}
			if c := available(comp); c.Reason != componentd.ReasonWaitingForDependencies {
				return false
			} else if want := "waiting for kube-apiserver to be Available"; c.Message != want {
				t.Errorf("%s: Available %q, want %q", comp, c.Message, want)
			}
		}
		return true
	}, "etcd and kube-apiserver scaled back, their dependents held at 0 and recorded WaitingForDependencies")

	d, err := cs.AppsV1().Deployments(ns).Get(h.Ctx, api.ComponentKubeAPIServer, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := cs.AppsV1().Deployments(ns).UpdateStatus(h.Ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, func() bool {
		w := workloads()
		for _, comp := range dependents {
			if w[comp].Replicas != 1 || available(comp).Reason != componentd.ReasonReplicasNotReady {
				return false
			}
		}
		return true
	}, "the dependents scaled back to 1 once kube-apiserver is Available, recorded from their Deployments")
}
