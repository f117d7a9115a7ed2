package nodepoold

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// infradCRDs is infrad's provider CRDs (LocalCluster, LocalMachine, LocalMachineTemplate),
// which infrad installs at its start.
const infradCRDs = "../infrad/provider/crds"

// capiEnv is nodepoold with in-process Cluster API on a real management kube-apiserver, with
// infrad's CRDs installed and a cluster record, its namespace and its Cluster API Cluster
// written the way clusterd writes them. No infrad runs: Machines stay unprovisioned.
type capiEnv struct {
	*env
	kube client.Client
	ns   string
	mgmt *localkube.Cluster
}

func startCAPI(t *testing.T, cluster string, opts ...envOption) *capiEnv {
	t.Helper()
	mgmt := testenv.KubeAPIServer(t)
	ctx := context.Background()
	if err := crd.Install(ctx, mgmt.RESTConfig, os.DirFS(infradCRDs), "infrad"); err != nil {
		t.Fatalf("install infrad's CRDs: %v", err)
	}
	e := start(t, mgmt, opts...)
	kube, err := client.New(mgmt.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ce := &capiEnv{env: e, kube: kube, ns: api.ControlPlaneNamespace(cluster), mgmt: mgmt}
	e.putCluster(cluster, "1.34.4")
	createClusterObjects(t, kube, cluster)
	return ce
}

// createClusterObjects writes what clusterd writes for a cluster: its namespace and its
// Cluster API Cluster (infrastructureRef: infrad's LocalCluster).
func createClusterObjects(t *testing.T, kube client.Client, cluster string) {
	t.Helper()
	ctx := context.Background()
	ns := api.ControlPlaneNamespace(cluster)
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: ns, Labels: map[string]string{api.LabelOwner: "clusterd", api.LabelCluster: cluster}},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: api.InfrastructureGroup, Kind: "LocalCluster", Name: cluster},
		},
	}
	if err := kube.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
}

func (ce *capiEnv) get(name string, obj client.Object) error {
	return ce.kube.Get(context.Background(), client.ObjectKey{Namespace: ce.ns, Name: name}, obj)
}

func (ce *capiEnv) machines(pool string) []clusterv1.Machine {
	ce.t.Helper()
	ms, err := listMachines(context.Background(), ce.kube, "demo", pool)
	if err != nil {
		ce.t.Fatal(err)
	}
	return ms
}

func (ce *capiEnv) md(name string) *clusterv1.MachineDeployment {
	ce.t.Helper()
	md := &clusterv1.MachineDeployment{}
	if err := ce.get(name, md); err != nil {
		ce.t.Fatalf("get MachineDeployment %s: %v", name, err)
	}
	return md
}

// requests is how many requests of verb on resources the management apiserver has answered.
func (ce *capiEnv) requests(verb string, resources ...string) float64 {
	ce.t.Helper()
	var n float64
	for _, r := range resources {
		n += testenv.APIRequests(ce.t, ce.mgmt.RESTConfig, verb, r)
	}
	return n
}

// waitReconciles waits until nodepoold has run n more reconciles.
func (ce *capiEnv) waitReconciles(n float64) {
	ce.t.Helper()
	g := ce.d.cfg.Registry
	count := func() float64 {
		v, _ := testenv.Metric(ce.t, g, "hostplane_reconcile_total", map[string]string{"controller": Name, "result": "requeue"})
		return v
	}
	from := count()
	testenv.Eventually(ce.t, 30*time.Second, func() bool { return count() >= from+n }, "nodepoold ran fewer than %v reconciles", n)
}

func (ce *capiEnv) secret(name string) *corev1.Secret {
	s := &corev1.Secret{}
	if err := ce.get(name, s); err != nil {
		return nil
	}
	return s
}

func TestNodePool_ReplacePoolGetsItsClusterAPIObjectsRollsOnConfigAndGoesAway(t *testing.T) {
	ce := startCAPI(t, "demo")
	np := ce.createPool("demo", poolBody("workers", replace3, `"nodeDrainTimeout":"5m","nodeVolumeDetachTimeout":"90s"`))
	hash := np.Status.ConfigHash

	// Until ignitiond's userdata for the hash is ready, nothing is written.
	testenv.Eventually(t, 30*time.Second, func() bool {
		got := ce.getPool("demo", "workers")
		c, _ := got.Status.Conditions.Get(api.NodePoolConditionReady)
		return c.Reason == ReasonWaitingForUserData
	}, "the pool never said it waits for its userdata")
	if err := ce.get("workers", &clusterv1.MachineDeployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a MachineDeployment before the userdata: %v", err)
	}

	ce.putIgnition("demo", "workers", hash, "token-one")
	secretName := api.UserDataSecretName("workers", hash)
	testenv.Eventually(t, time.Minute, func() bool { return ce.get("workers", &clusterv1.MachineDeployment{}) == nil }, "no MachineDeployment")

	// The userdata Secret.
	sec := ce.secret(secretName)
	if sec == nil || string(sec.Data["format"]) != "ignition" ||
		sec.Labels[api.LabelNodePool] != "workers" || sec.Labels[clusterv1.ClusterNameLabel] != "demo" || sec.Labels[api.LabelOwner] != Name {
		t.Fatalf("userdata Secret %s = %+v", secretName, sec)
	}
	if string(sec.Data["value"]) == "" || !strings.Contains(string(sec.Data["value"]), "token-one") {
		t.Errorf("userdata Secret value = %q, want the stub with the token", sec.Data["value"])
	}

	// The MachineDeployment, with Cluster API's webhook defaults set by nodepoold.
	md := ce.md("workers")
	tpl := md.Spec.Template
	switch {
	case md.Spec.ClusterName != "demo" || md.Spec.Replicas == nil || *md.Spec.Replicas != 3:
		t.Errorf("MachineDeployment cluster %q replicas %v", md.Spec.ClusterName, md.Spec.Replicas)
	case md.Spec.Rollout.Strategy.Type != clusterv1.RollingUpdateMachineDeploymentStrategyType ||
		md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge.IntValue() != 1 || md.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0:
		t.Errorf("rollout = %+v", md.Spec.Rollout)
	case md.Spec.Selector.MatchLabels[clusterv1.ClusterNameLabel] != "demo" || md.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel] != "workers":
		t.Errorf("selector = %v", md.Spec.Selector.MatchLabels)
	case tpl.Labels[api.LabelNodePool] != "workers" || tpl.Labels[clusterv1.MachineDeploymentNameLabel] != "workers" || tpl.Labels[clusterv1.ClusterNameLabel] != "demo":
		t.Errorf("template labels = %v", tpl.Labels)
	case tpl.Spec.Version != "v1.34.4" || tpl.Spec.Bootstrap.DataSecretName == nil || *tpl.Spec.Bootstrap.DataSecretName != secretName:
		t.Errorf("template version %q bootstrap %v", tpl.Spec.Version, tpl.Spec.Bootstrap.DataSecretName)
	case tpl.Spec.InfrastructureRef.Kind != api.KindLocalMachineTemplate || tpl.Spec.InfrastructureRef.Name != "workers" || tpl.Spec.InfrastructureRef.APIGroup != api.InfrastructureGroup:
		t.Errorf("infrastructureRef = %+v", tpl.Spec.InfrastructureRef)
	case tpl.Spec.Deletion.NodeDrainTimeoutSeconds == nil || *tpl.Spec.Deletion.NodeDrainTimeoutSeconds != 300 ||
		tpl.Spec.Deletion.NodeVolumeDetachTimeoutSeconds == nil || *tpl.Spec.Deletion.NodeVolumeDetachTimeoutSeconds != 90:
		t.Errorf("deletion = %+v", tpl.Spec.Deletion)
	case md.Labels[api.LabelOwner] != Name || md.Labels[api.LabelCluster] != "demo":
		t.Errorf("MachineDeployment labels = %v", md.Labels)
	}

	// The template and the MachineHealthCheck.
	lmt := &infrav1.LocalMachineTemplate{}
	if err := ce.get("workers", lmt); err != nil {
		t.Fatalf("LocalMachineTemplate: %v", err)
	}
	if l := lmt.Spec.Template.ObjectMeta.Labels[api.LabelNodePool]; l != "workers" {
		t.Errorf("LocalMachineTemplate template labels lack the pool: %+v", lmt.Spec.Template)
	}
	mhc := &clusterv1.MachineHealthCheck{}
	if err := ce.get("workers", mhc); err != nil {
		t.Fatalf("MachineHealthCheck: %v", err)
	}
	if mhc.Spec.Selector.MatchLabels[api.LabelNodePool] != "workers" || *mhc.Spec.Checks.NodeStartupTimeoutSeconds != 1200 ||
		len(mhc.Spec.Checks.UnhealthyNodeConditions) != 2 || *mhc.Spec.Checks.UnhealthyNodeConditions[0].TimeoutSeconds != 480 ||
		mhc.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.IntValue() != 2 {
		t.Errorf("MachineHealthCheck spec = %+v", mhc.Spec)
	}

	// Cluster API creates the MachineSet and the three Machines, labelled with the pool.
	testenv.Eventually(t, 2*time.Minute, func() bool { return len(ce.machines("workers")) == 3 }, "Cluster API never created 3 Machines")
	var sets clusterv1.MachineSetList
	if err := ce.kube.List(context.Background(), &sets, client.InNamespace(ce.ns), client.MatchingLabels{api.LabelNodePool: "workers"}); err != nil || len(sets.Items) != 1 {
		t.Fatalf("MachineSets = %d (%v)", len(sets.Items), err)
	}
	for _, m := range ce.machines("workers") {
		if m.Spec.Bootstrap.DataSecretName == nil || *m.Spec.Bootstrap.DataSecretName != secretName || m.Spec.Version != "v1.34.4" {
			t.Errorf("machine %s: bootstrap %v version %s", m.Name, m.Spec.Bootstrap.DataSecretName, m.Spec.Version)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		got := ce.getPool("demo", "workers")
		c, _ := got.Status.Conditions.Get(api.NodePoolConditionReady)
		return got.Status.Replicas == 3 && got.Status.ReadyReplicas == 0 && c.Reason == ReasonWaitingForMachines
	}, "the pool never counted its 3 unready machines")

	// A token rotation rewrites the Secret in place: no new Secret, no rollout.
	mdGen := ce.md("workers").Generation
	ce.putIgnition("demo", "workers", hash, "token-two")
	testenv.Eventually(t, 30*time.Second, func() bool {
		s := ce.secret(secretName)
		return s != nil && strings.Contains(string(s.Data["value"]), "token-two")
	}, "the rotated userdata never reached the Secret")
	if g := ce.md("workers").Generation; g != mdGen {
		t.Errorf("a token rotation changed the MachineDeployment (generation %d → %d)", mdGen, g)
	}

	// A labels-only change keeps the hash and the template.
	relabeled := ce.patchPool("demo", "workers", `{"spec":{"nodeLabels":{"tier":"gold"}}}`)
	if relabeled.Status.ConfigHash != hash {
		t.Fatalf("a label change moved the hash")
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return ce.getPool("demo", "workers").Status.ObservedGeneration == relabeled.Generation
	}, "the label change was never observed")
	if md := ce.md("workers"); md.Generation != mdGen || *md.Spec.Template.Spec.Bootstrap.DataSecretName != secretName {
		t.Errorf("a label change touched the MachineDeployment: generation %d → %d, secret %s", mdGen, md.Generation, *md.Spec.Template.Spec.Bootstrap.DataSecretName)
	}

	// Nothing changed since: the pool is still reconciled every 300 ms (its machines wait for
	// infrad), and none of its objects is sent to the management apiserver again.
	applies := ce.requests("APPLY", "machinedeployments", "localmachinetemplates", "machinehealthchecks", "secrets")
	ce.waitReconciles(5)
	if n := ce.requests("APPLY", "machinedeployments", "localmachinetemplates", "machinehealthchecks", "secrets"); n != applies {
		t.Errorf("a settled pool's reconciles sent %v applies of objects that had not changed", n-applies)
	}
	// An edit of the MachineDeployment's spec by someone else is undone at once.
	edited := ce.md("workers")
	edited.Spec.Replicas = ptr.To(int32(7))
	if err := ce.kube.Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return *ce.md("workers").Spec.Replicas == 3 },
		"the MachineDeployment kept replicas 7 written over nodepoold's 3")
	mdGen = ce.md("workers").Generation

	// A config change: a new hash; once ignitiond's userdata is ready, a new Secret and the
	// template points at it (Cluster API starts replacing machines).
	configured := ce.patchPool("demo", "workers", `{"spec":{"config":[{"name":"motd","content":"`+motd+`"}]}}`)
	newHash := configured.Status.ConfigHash
	if newHash == hash {
		t.Fatal("a config change kept the hash")
	}
	ce.putIgnition("demo", "workers", newHash, "token-three")
	newSecret := api.UserDataSecretName("workers", newHash)
	testenv.Eventually(t, time.Minute, func() bool {
		md := ce.md("workers")
		return ce.secret(newSecret) != nil && *md.Spec.Template.Spec.Bootstrap.DataSecretName == newSecret
	}, "the MachineDeployment never pointed at the new userdata")
	testenv.Eventually(t, time.Minute, func() bool {
		for _, m := range ce.machines("workers") {
			if *m.Spec.Bootstrap.DataSecretName == newSecret {
				return true
			}
		}
		return false
	}, "Cluster API never created a machine of the new config")
	if ce.secret(secretName) == nil {
		t.Errorf("the old userdata Secret went while machines still boot from it")
	}

	// autoRepair off: the MachineHealthCheck goes.
	ce.patchPool("demo", "workers", `{"spec":{"management":{"autoRepair":false}}}`)
	testenv.Eventually(t, 30*time.Second, func() bool { return apierrors.IsNotFound(ce.get("workers", &clusterv1.MachineHealthCheck{})) },
		"the MachineHealthCheck stayed after autoRepair was turned off")
	deletes := ce.requests("DELETE", "machinehealthchecks")
	ce.waitReconciles(5)
	if n := ce.requests("DELETE", "machinehealthchecks"); n != deletes {
		t.Errorf("the pool's reconciles sent %v deletes of its absent MachineHealthCheck", n-deletes)
	}

	// Delete: every object and the key go.
	if status, b := ce.do(http.MethodDelete, "/v1/clusters/demo/nodepools/workers", ""); status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", status, b)
	}
	testenv.Eventually(t, 2*time.Minute, func() bool { return ce.getPool("demo", "workers") == nil }, "the pool never went away: %+v", ce.getPool("demo", "workers"))
	if ms := ce.machines("workers"); len(ms) != 0 {
		t.Errorf("machines left: %d", len(ms))
	}
	for _, obj := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.MachineHealthCheck{}, lmt} {
		if err := ce.get("workers", obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T left: %v", obj, err)
		}
	}
	var secrets corev1.SecretList
	if err := ce.kube.List(context.Background(), &secrets, client.InNamespace(ce.ns), client.MatchingLabels{api.LabelNodePool: "workers"}); err != nil || len(secrets.Items) != 0 {
		t.Errorf("userdata Secrets left: %d (%v)", len(secrets.Items), err)
	}
	if !ce.seen("io.hostplane.nodepool.deleted", "demo/workers") {
		t.Errorf("nodepool.deleted not published")
	}
}
