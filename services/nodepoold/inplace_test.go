package nodepoold

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// guestEnv is nodepoold with Cluster API "external" on a management kube-apiserver where the
// test plays Cluster API and the machines: it creates the Machines (with their nodeRef) and,
// in a second kube-apiserver standing in for the guest cluster (its admin kubeconfig sealed
// into the cluster's PKI record as pkid does), their Nodes.
type guestEnv struct {
	*capiEnv
	guest     *kubernetes.Clientset
	guestKube *localkube.Cluster // the guest's etcd and kube-apiserver
}

func startGuest(t *testing.T, opts ...envOption) *guestEnv {
	t.Helper()
	mgmt := testenv.KubeAPIServer(t)
	guest := testenv.KubeAPIServer(t)
	ctx := context.Background()
	if err := crd.Install(ctx, mgmt.RESTConfig, capi.CRDs, "test"); err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, mgmt.RESTConfig, os.DirFS(infradCRDs), "infrad"); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	e := start(t, mgmt, append([]envOption{func(c *Config) { c.ClusterAPI = ClusterAPIExternal; c.DataDir = dataDir }}, opts...)...)
	kube, err := client.New(mgmt.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ge := &guestEnv{capiEnv: &capiEnv{env: e, kube: kube, ns: api.ControlPlaneNamespace("demo")}, guestKube: guest}
	e.putCluster("demo", "1.34.4")
	createClusterObjects(t, kube, "demo")

	key, err := certs.LoadOrCreateSealKey(filepath.Join(dataDir, "pki.key"))
	if err != nil {
		t.Fatal(err)
	}
	pki := store.New[api.ClusterPKI](e.bucket(bus.BucketPKI))
	rec := api.ClusterPKI{Serial: "1", Ready: true, Kubeconfigs: map[string][]byte{api.KubeconfigAdmin: key.Seal(guest.Kubeconfig)}}
	rec.Name = "demo"
	if _, err := pki.Create(ctx, "demo", &rec); err != nil {
		t.Fatal(err)
	}
	ge.guest, err = kubernetes.NewForConfig(guest.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return ge
}

// addMachine creates a Machine of the pool booting secret, with a Ready Node reporting hash.
func (ge *guestEnv) addMachine(pool, name, secret, hash string) {
	ge.t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ge.ns, Labels: map[string]string{
			api.LabelCluster: "demo", api.LabelNodePool: pool, clusterv1.ClusterNameLabel: "demo"}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "demo",
			Version:           "v1.34.4",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: &secret},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: api.InfrastructureGroup, Kind: api.KindLocalMachine, Name: name},
		},
	}
	if err := ge.kube.Create(ctx, m); err != nil {
		ge.t.Fatal(err)
	}
	// Cluster API's Machine controller runs beside the test and may write the Machine first.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := ge.kube.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
		m.Status.Phase = "Running"
		return ge.kube.Status().Update(ctx, m)
	})
	if err != nil {
		ge.t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelNodePool: pool},
		Annotations: map[string]string{api.AnnotationCurrentConfig: hash}}}
	if _, err = ge.guest.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		ge.t.Fatal(err)
	}
	// nodepoold labels a new Node as soon as it sees it, so the status write may race it.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := ge.node(name)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		n.Status.NodeInfo.KubeletVersion = "v1.34.4"
		_, err := ge.guest.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		ge.t.Fatal(err)
	}
}

func (ge *guestEnv) node(name string) *corev1.Node {
	ge.t.Helper()
	n, err := ge.guest.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		ge.t.Fatal(err)
	}
	return n
}

func (ge *guestEnv) machine(name string) *clusterv1.Machine {
	ge.t.Helper()
	m := &clusterv1.Machine{}
	if err := ge.get(name, m); err != nil {
		ge.t.Fatal(err)
	}
	return m
}

// applyConfig does what the machine does once infrad relays its desired config: it reports
// the hash on its Node.
func (ge *guestEnv) applyConfig(name, hash string) {
	ge.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := ge.node(name)
		n.Annotations[api.AnnotationCurrentConfig] = hash
		_, err := ge.guest.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		ge.t.Fatal(err)
	}
}

func TestNodePool_InPlaceUpdatesOneMachineAtATimeAndLabelsNodesWithoutARollout(t *testing.T) {
	ge := startGuest(t)
	ctx := context.Background()
	np := ge.createPool("demo", poolBody("metal", `"replicas":2,"release":{"version":"1.34.4"},"management":{"upgradeType":"InPlace"}`,
		`"nodeLabels":{"tier":"gold","zone":"a"},"taints":[{"key":"dedicated","value":"metal","effect":"NoSchedule"}],"nodeDrainTimeout":"3s"`))
	hash := np.Status.ConfigHash
	ge.putIgnition("demo", "metal", hash, "token-one")
	secret := api.UserDataSecretName("metal", hash)
	testenv.Eventually(t, time.Minute, func() bool { return ge.get("metal", &clusterv1.MachineSet{}) == nil }, "no MachineSet")
	ms := &clusterv1.MachineSet{}
	if err := ge.get("metal", ms); err != nil || *ms.Spec.Replicas != 2 || *ms.Spec.Template.Spec.Bootstrap.DataSecretName != secret ||
		ms.Spec.Template.Labels[api.LabelNodePool] != "metal" || ms.Spec.Selector.MatchLabels[clusterv1.MachineSetNameLabel] != "metal" {
		t.Fatalf("MachineSet = %+v (%v)", ms.Spec, err)
	}
	if err := ge.get("metal", &clusterv1.MachineDeployment{}); err == nil {
		t.Errorf("an InPlace pool got a MachineDeployment")
	}
	ge.addMachine("metal", "metal-a", secret, hash)
	ge.addMachine("metal", "metal-b", secret, hash)

	// The pool is ready; its Nodes get the labels and taints, in place.
	testenv.Eventually(t, time.Minute, func() bool {
		got := ge.getPool("demo", "metal")
		return got.Status.ReadyReplicas == 2 && got.Status.UpdatedReplicas == 2 && got.Status.Version == "1.34.4" &&
			got.Status.Conditions.IsTrue(api.NodePoolConditionReady)
	}, "the pool never became ready: %+v", ge.getPool("demo", "metal"))
	testenv.Eventually(t, 30*time.Second, func() bool {
		n := ge.node("metal-a")
		return n.Labels["tier"] == "gold" && n.Labels["zone"] == "a" && taint(n, "dedicated") == "metal"
	}, "the labels and taints never reached the node: %+v %+v", ge.node("metal-a").Labels, ge.node("metal-a").Spec.Taints)
	for _, m := range []string{"metal-a", "metal-b"} {
		if got := ge.machine(m).Annotations[api.AnnotationDesiredConfig]; got != hash {
			t.Errorf("machine %s desired config = %q, want the adopted %s", m, got, short(hash))
		}
	}

	// Changing a label and dropping a taint reaches the nodes without touching the hash.
	relabeled := ge.patchPool("demo", "metal", `{"spec":{"nodeLabels":{"tier":"silver","zone":null},"taints":null}}`)
	if relabeled.Status.ConfigHash != hash {
		t.Fatal("a label change moved the hash")
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		n := ge.node("metal-b")
		_, zone := n.Labels["zone"]
		return n.Labels["tier"] == "silver" && !zone && taint(n, "dedicated") == "" && n.Labels[api.LabelNodePool] == "metal"
	}, "the relabel never reached the node: %+v %+v", ge.node("metal-b").Labels, ge.node("metal-b").Spec.Taints)

	// A pod protected by a PodDisruptionBudget on metal-a (no controller grants disruptions
	// here, so every eviction is refused): the drain waits for it until nodeDrainTimeout.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default", Labels: map[string]string{"app": "guarded"}},
		Spec: corev1.PodSpec{NodeName: "metal-a", Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}}}
	// No controller manager runs here to create the namespace's ServiceAccount.
	if _, err := ge.guest.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ge.guest.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	if _, err := ge.guest.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// An upgrade: one machine at a time is cordoned, drained and handed the new config.
	upgraded := ge.patchPool("demo", "metal", `{"spec":{"config":[{"name":"motd","content":"`+motd+`"}]}}`)
	newHash := upgraded.Status.ConfigHash
	ge.putIgnition("demo", "metal", newHash, "token-two")
	newSecret := api.UserDataSecretName("metal", newHash)
	var first, second string
	testenv.Eventually(t, time.Minute, func() bool {
		for _, m := range []string{"metal-a", "metal-b"} {
			if ge.node(m).Spec.Unschedulable {
				first = m
			}
		}
		return first != ""
	}, "no node was cordoned")
	second = map[string]string{"metal-a": "metal-b", "metal-b": "metal-a"}[first]
	if ge.node(second).Spec.Unschedulable {
		t.Fatalf("both nodes cordoned at once with maxUnavailable 1")
	}
	if first == "metal-a" {
		testenv.Eventually(t, 30*time.Second, func() bool {
			c, _ := ge.getPool("demo", "metal").Status.Conditions.Get(api.NodePoolConditionUpdatingConfig)
			return strings.Contains(c.Message, "draining node metal-a (1 pods left)") ||
				ge.machine("metal-a").Annotations[api.AnnotationDesiredConfig] == newHash
		}, "the drain never waited for the guarded pod")
	}
	testenv.Eventually(t, time.Minute, func() bool {
		m := ge.machine(first)
		return m.Annotations[api.AnnotationDesiredConfig] == newHash && m.Annotations[api.AnnotationDesiredUserData] == newSecret
	}, "machine %s never got the new config: %v", first, ge.machine(first).Annotations)
	if ge.machine(second).Annotations[api.AnnotationDesiredConfig] != hash || ge.node(second).Spec.Unschedulable {
		t.Fatalf("machine %s moved before %s finished", second, first)
	}
	ge.applyConfig(first, newHash)
	testenv.Eventually(t, time.Minute, func() bool {
		return !ge.node(first).Spec.Unschedulable && ge.machine(second).Annotations[api.AnnotationDesiredConfig] == newHash
	}, "node %s was never uncordoned or %s never got its turn", first, second)
	ge.applyConfig(second, newHash)
	testenv.Eventually(t, time.Minute, func() bool {
		got := ge.getPool("demo", "metal")
		c, _ := got.Status.Conditions.Get(api.NodePoolConditionUpdatingConfig)
		return got.Status.UpdatedReplicas == 2 && c.Status == api.ConditionFalse && !ge.node(second).Spec.Unschedulable &&
			got.Status.Conditions.IsTrue(api.NodePoolConditionReady)
	}, "the in-place update never finished: %+v", ge.getPool("demo", "metal").Status)
	for _, m := range []string{"metal-a", "metal-b"} {
		if a := ge.machine(m).Annotations; a[AnnotationInPlaceTarget] != "" || a[AnnotationInPlaceDrainStarted] != "" {
			t.Errorf("machine %s kept the updater's annotations: %v", m, a)
		}
		if ge.node(m).Annotations[AnnotationCordonedBy] != "" {
			t.Errorf("node %s kept %s", m, AnnotationCordonedBy)
		}
	}
	// The old userdata Secret goes once no machine refers to it... but both machines still
	// boot from it (spec.bootstrap is immutable): it stays.
	var secrets corev1.SecretList
	if err := ge.kube.List(ctx, &secrets, client.InNamespace(ge.ns), client.MatchingLabels{api.LabelNodePool: "metal"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{secret, newSecret}; !slices.Equal(names, slices.Sorted(slices.Values(want))) {
		t.Errorf("userdata Secrets = %v, want %v", names, want)
	}
}

// taint is the value of the node's NoSchedule taint key ("" when it has none; "<none>" for
// one without a value).
func taint(n *corev1.Node, key string) string {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			if t.Value == "" {
				return "<none>"
			}
			return t.Value
		}
	}
	return ""
}
