package componentd_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
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
