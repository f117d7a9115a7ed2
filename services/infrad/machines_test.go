package infrad_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/infrad/provider"
	"github.com/hostplane/hostplane/services/localcloud"
)

// machinesEnv adds what the machines provider needs to env: a management kube-apiserver
// with Cluster API's CRDs, a client of it, and a local cloud running in the test.
type machinesEnv struct {
	*env
	mgmt     *localkube.Cluster
	kube     crclient.Client
	cloud    *localcloud.Client
	cloudURL string
	cloudDir string
}

func newMachinesEnv(t *testing.T) *machinesEnv {
	t.Helper()
	mgmt := testenv.KubeAPIServer(t)
	e := newEnv(t)
	ctx := t.Context()
	if err := crd.Install(ctx, mgmt.RESTConfig, capi.CRDs, "test"); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kube, err := crclient.New(mgmt.RESTConfig, crclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lc, err := localcloud.New(localcloud.Config{Dir: dir, Listen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(newQuietWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, "localcloud run", lc.Run)
	select {
	case <-lc.Ready():
	case <-time.After(wait):
		t.Fatal("the local cloud did not become ready")
	}
	cc, err := localcloud.NewClient(lc.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &machinesEnv{env: e, mgmt: mgmt, kube: kube, cloud: cc, cloudURL: lc.URL(), cloudDir: dir}
}

// startInfrad runs infrad with the management cluster and the local cloud.
func (me *machinesEnv) startInfrad() *running {
	me.t.Helper()
	return me.start(func(c *infrad.Config) {
		c.ManagementKubeconfig = me.mgmt.KubeconfigPath
		c.LocalCloudURL = me.cloudURL
	})
}

// createMachine writes, as Cluster API would, a Machine of pool in cluster's namespace and the
// LocalMachine it owns; with userData its bootstrap Secret exists and the Machine names it,
// without it the Machine waits for a bootstrap provider.
func (me *machinesEnv) createMachine(cluster, pool, name string, userData []byte, opts ...func(*infrav1.LocalMachine)) *clusterv1.Machine {
	me.t.Helper()
	ctx := me.t.Context()
	ns := api.ControlPlaneNamespace(cluster)
	if err := me.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		me.t.Fatal(err)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: cluster, api.LabelNodePool: pool,
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Version:           "v1.34.4",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: api.InfrastructureGroup, Kind: api.KindLocalMachine, Name: name},
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name,
			}},
		},
	}
	if userData != nil {
		secret := me.createUserData(cluster, pool+"-userdata-0", userData)
		m.Spec.Bootstrap = clusterv1.Bootstrap{DataSecretName: &secret}
	}
	if err := me.kube.Create(ctx, m); err != nil {
		me.t.Fatal(err)
	}
	lm := &infrav1.LocalMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID,
		}},
	}}
	for _, o := range opts {
		o(lm)
	}
	if err := me.kube.Create(ctx, lm); err != nil {
		me.t.Fatal(err)
	}
	return m
}

// createUserData writes a bootstrap data Secret (if missing) and returns its name.
func (me *machinesEnv) createUserData(cluster, name string, value []byte) string {
	me.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: api.ControlPlaneNamespace(cluster), Name: name},
		Data:       map[string][]byte{"value": value, "format": []byte("ignition")},
	}
	if err := me.kube.Create(me.t.Context(), s); err != nil && !apierrors.IsAlreadyExists(err) {
		me.t.Fatal(err)
	}
	return name
}

// localMachine waits until the cluster's LocalMachine name satisfies cond and returns it.
func (me *machinesEnv) localMachine(cluster, name, what string, cond func(*infrav1.LocalMachine) bool) *infrav1.LocalMachine {
	me.t.Helper()
	var got *infrav1.LocalMachine
	testenv.Eventually(me.t, wait, func() bool {
		lm := &infrav1.LocalMachine{}
		if err := me.kube.Get(me.t.Context(), types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: name}, lm); err != nil {
			return false
		}
		got = lm
		return cond(lm)
	}, "LocalMachine %s/%s: %s", cluster, name, what)
	return got
}

// waitGone waits until obj (its namespace and name) is deleted from the management cluster.
func (me *machinesEnv) waitGone(obj crclient.Object, what string) {
	me.t.Helper()
	testenv.Eventually(me.t, wait, func() bool {
		fresh := obj.DeepCopyObject().(crclient.Object)
		return apierrors.IsNotFound(me.kube.Get(me.t.Context(), crclient.ObjectKeyFromObject(obj), fresh))
	}, "%s deleted", what)
}

// startDemo runs infrad with the management cluster and the local cloud, and a local cluster
// "demo" whose infrastructure is ready.
func (me *machinesEnv) startDemo() *running {
	me.t.Helper()
	d := me.startInfrad()
	me.createCluster("demo", api.SingleReplica, api.PlatformLocal)
	me.readyInfra("demo")
	return d
}

func isProvisioned(lm *infrav1.LocalMachine) bool {
	p := lm.Status.Initialization.Provisioned
	return p != nil && *p
}

func readyReason(lm *infrav1.LocalMachine) string {
	if c := meta.FindStatusCondition(lm.Status.Conditions, infrav1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// cloudUserData reads the userdata the local cloud keeps for a machine (its record on disk):
// the one it boots with and, for an in-place update, the pending one.
func (me *machinesEnv) cloudUserData(cluster, name string) (boot, pending []byte) {
	me.t.Helper()
	b, err := os.ReadFile(filepath.Join(me.cloudDir, "machines", cluster, name, "machine.json"))
	if err != nil {
		me.t.Fatalf("the local cloud keeps no record of %s/%s: %v", cluster, name, err)
	}
	var rec struct {
		Spec            struct{ UserData []byte } `json:"spec"`
		PendingUserData []byte                    `json:"pendingUserData"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		me.t.Fatal(err)
	}
	return rec.Spec.UserData, rec.PendingUserData
}

// machineEvents counts the events stored on hostplane.evt.<cluster>.machine.<verb>.
func (e *env) machineEvents(cluster, verb string) uint64 {
	e.t.Helper()
	subject, err := events.Subject(cluster, events.ResourceMachine, verb)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := e.nats.JS.Stream(e.t.Context(), events.EventsStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// deleteCluster removes the cluster's key as clusterd finally does.
func (e *env) deleteCluster(name string) {
	e.t.Helper()
	if err := e.clusters.Delete(e.t.Context(), name, 0); err != nil {
		e.t.Fatal(err)
	}
	e.publishCluster(name, "deleted")
}

// send makes an HTTP request with a JSON body and decodes the answer into out (if not nil).
func send(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode the answer: %v", method, url, err)
		}
	}
	return resp.StatusCode
}

func TestLocalCluster_FollowsTheInfraRecordAndGoesWithTheCluster(t *testing.T) {
	me := newMachinesEnv(t)
	me.startInfrad()
	me.createCluster("demo", api.SingleReplica, api.PlatformLocal)
	inf := me.readyInfra("demo")

	// The provider's CRDs are installed with Cluster API's contract label.
	crds, err := crd.Load(provider.CRDs)
	if err != nil || len(crds) != 3 {
		t.Fatalf("embedded CRDs: %d, %v", len(crds), err)
	}
	cs, err := apiextensions.NewForConfig(me.mgmt.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), c.Name, metav1.GetOptions{})
		if err != nil || got.Labels["cluster.x-k8s.io/v1beta2"] != api.InfrastructureVersion || got.Spec.Group != api.InfrastructureGroup {
			t.Errorf("CRD %s: %v, labels %v", c.Name, err, got.Labels)
		}
	}

	key := types.NamespacedName{Namespace: api.ControlPlaneNamespace("demo"), Name: "demo"}
	var lc infrav1.LocalCluster
	testenv.Eventually(t, wait, func() bool {
		return me.kube.Get(t.Context(), key, &lc) == nil && lc.Status.Initialization.Provisioned != nil
	}, "LocalCluster demo written")
	if ep := lc.Spec.ControlPlaneEndpoint; ep.Host != inf.Endpoint.Host || int(ep.Port) != inf.Endpoint.Port || !*lc.Status.Initialization.Provisioned {
		t.Errorf("LocalCluster endpoint %+v provisioned %v; want %+v, true", ep, *lc.Status.Initialization.Provisioned, inf.Endpoint)
	}
	if lc.Labels[api.LabelOwner] != infrad.Name || lc.Labels[clusterv1.ClusterNameLabel] != "demo" {
		t.Errorf("LocalCluster labels %v", lc.Labels)
	}
	// Cluster API's tools (clusterctl describe cluster) show an infrastructure cluster by its
	// v1beta2 Ready condition.
	if c := meta.FindStatusCondition(lc.Status.Conditions, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != infrav1.ReasonProvisioned {
		t.Errorf("LocalCluster Ready condition %+v; want True, %s", c, infrav1.ReasonProvisioned)
	}
	var ns corev1.Namespace
	if err := me.kube.Get(t.Context(), types.NamespacedName{Name: key.Namespace}, &ns); err != nil || ns.Labels[api.LabelOwner] != infrad.Name {
		t.Errorf("namespace %s: %v, labels %v; want it created by infrad", key.Namespace, err, ns.Labels)
	}

	// Cluster API's Cluster deletion may remove it first (no finalizer holds it) ...
	if err := me.kube.Delete(t.Context(), &lc); err != nil {
		t.Fatal(err)
	}
	if err := me.kube.Get(t.Context(), key, &lc); !apierrors.IsNotFound(err) {
		t.Fatalf("LocalCluster after delete: %v; want it gone at once", err)
	}
	// ... and once the cluster is gone, infrad deletes its own (here: a fresh one).
	me.createCluster("other", api.SingleReplica, api.PlatformNone)
	me.readyInfra("other")
	otherKey := types.NamespacedName{Namespace: api.ControlPlaneNamespace("other"), Name: "other"}
	testenv.Eventually(t, wait, func() bool { return me.kube.Get(t.Context(), otherKey, &lc) == nil }, "LocalCluster of a platform-none cluster written")
	me.deleteCluster("other")
	me.waitGone(&lc, "LocalCluster other (its cluster is gone)")
}

func TestLocalMachine_IsProvisionedInTheLocalCloudWithItsBootstrapDataAndReleasedOnDelete(t *testing.T) {
	me := newMachinesEnv(t)
	d := me.startDemo()
	ctx := t.Context()

	// A Machine without bootstrap data: nothing is provisioned, and the LocalMachine says why.
	m := me.createMachine("demo", "workers", "workers-a", nil, func(lm *infrav1.LocalMachine) { lm.Spec.InstanceType = "local.large" })
	lm := me.localMachine("demo", "workers-a", "waits for bootstrap data", func(lm *infrav1.LocalMachine) bool {
		return readyReason(lm) == infrav1.ReasonWaitingForBootstrapData
	})
	if isProvisioned(lm) || lm.Spec.ProviderID != "" || slices.Contains(lm.Finalizers, infrav1.FinalizerLocalMachine) {
		t.Errorf("LocalMachine without bootstrap data: provisioned %v, providerID %q, finalizers %v", isProvisioned(lm), lm.Spec.ProviderID, lm.Finalizers)
	}
	if _, err := me.cloud.Get(ctx, "demo", "workers-a"); !errors.Is(err, localcloud.ErrNotFound) {
		t.Errorf("cloud machine before bootstrap data: %v, want ErrNotFound", err)
	}

	// The bootstrap provider sets the data Secret: the cloud machine boots with its value.
	userData := []byte(`{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://127.0.0.1:1/ignition"}]}}}`)
	secret := me.createUserData("demo", "workers-userdata-1", userData)
	patch := crclient.MergeFrom(m.DeepCopy())
	m.Spec.Bootstrap.DataSecretName = &secret
	if err := me.kube.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	lm = me.localMachine("demo", "workers-a", "provisioned", isProvisioned)
	if want := api.ProviderID("demo", "workers-a"); lm.Spec.ProviderID != want {
		t.Errorf("spec.providerID %q, want %q", lm.Spec.ProviderID, want)
	}
	if !slices.Contains(lm.Finalizers, infrav1.FinalizerLocalMachine) || lm.Annotations[infrav1.AnnotationAppliedUserData] != secret {
		t.Errorf("finalizers %v, applied userdata %q; want the finalizer and %q", lm.Finalizers, lm.Annotations[infrav1.AnnotationAppliedUserData], secret)
	}
	if len(lm.Status.Addresses) != 1 || lm.Status.Addresses[0].Address != "workers-a" {
		t.Errorf("addresses %+v, want the hostname", lm.Status.Addresses)
	}
	st, err := me.cloud.Get(ctx, "demo", "workers-a")
	if err != nil {
		t.Fatalf("cloud machine: %v", err)
	}
	if st.ProviderID != lm.Spec.ProviderID || st.NodePool != "workers" || st.Cluster != "demo" || st.InstanceType != "local.large" || st.Zone == "" {
		t.Errorf("cloud machine %+v, want a local.large in a zone", st)
	}
	if boot, _ := me.cloudUserData("demo", "workers-a"); !bytes.Equal(boot, userData) {
		t.Errorf("the cloud machine boots with %q, want the Secret's value %q", boot, userData)
	}
	testenv.Eventually(t, wait, func() bool { return me.machineEvents("demo", events.VerbMachineCreated) >= 1 }, "machine.created published")
	if n, ok := testenv.Metric(t, d.registry, provider.MetricMachineProvisioning, nil); !ok || n != 1 {
		t.Errorf("%s count %v (%v), want 1", provider.MetricMachineProvisioning, n, ok)
	}
	// The cloud's state reaches the LocalMachine (its fake Ignition source never answers).
	me.localMachine("demo", "workers-a", "reports the cloud state and zone", func(lm *infrav1.LocalMachine) bool {
		c := meta.FindStatusCondition(lm.Status.Conditions, infrav1.ConditionReady)
		return lm.Status.State != "" && c != nil && c.Status == metav1.ConditionFalse && c.Reason == lm.Status.State &&
			lm.Status.FailureDomain == st.Zone
	})

	// The HTTP API lists it, joined with the cloud's report.
	var list api.MachineList
	if code := send(t, http.MethodGet, d.url+"/v1/clusters/demo/machines", "", &list); code != http.StatusOK || len(list.Items) != 1 {
		t.Fatalf("GET machines: %d %+v", code, list)
	}
	if got := list.Items[0]; got.Name != "workers-a" || got.Cluster != "demo" || got.NodePool != "workers" || got.Version != "v1.34.4" ||
		got.ProviderID != lm.Spec.ProviderID || got.CreatedAt.IsZero() || got.InstanceType != "local.large" || got.Zone != st.Zone {
		t.Errorf("listed machine %+v", got)
	}
	var types api.InstanceTypeList
	if code := send(t, http.MethodGet, d.url+"/v1/platforms/local/instancetypes", "", &types); code != http.StatusOK ||
		len(types.Items) != len(api.LocalInstanceTypes()) || types.Items[0].Name != "local.small" {
		t.Errorf("GET instance types: %d %+v, want the catalogue", code, types)
	}
	if code := send(t, http.MethodGet, d.url+"/v1/clusters/nope/machines", "", nil); code != http.StatusNotFound {
		t.Errorf("GET machines of an unknown cluster: %d, want 404", code)
	}

	// InPlace: the Machine asks for other userdata; the cloud gets it and the LocalMachine
	// records it.
	newData := []byte(`{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://127.0.0.1:2/ignition"}]}}}`)
	next := me.createUserData("demo", "workers-userdata-2", newData)
	patch = crclient.MergeFrom(m.DeepCopy())
	m.Annotations = map[string]string{api.AnnotationDesiredUserData: next, api.AnnotationDesiredConfig: "2222"}
	if err := me.kube.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	me.localMachine("demo", "workers-a", "records the in-place userdata", func(lm *infrav1.LocalMachine) bool {
		return lm.Annotations[infrav1.AnnotationAppliedUserData] == next
	})
	if boot, pending := me.cloudUserData("demo", "workers-a"); !bytes.Equal(boot, newData) && !bytes.Equal(pending, newData) {
		t.Errorf("the cloud machine has userdata %q (pending %q), want %q", boot, pending, newData)
	}

	// Deleting the LocalMachine deletes the cloud machine, then releases the finalizer.
	if err := me.kube.Delete(ctx, lm); err != nil {
		t.Fatal(err)
	}
	me.waitGone(lm, "LocalMachine (finalizer released)")
	if _, err := me.cloud.Get(ctx, "demo", "workers-a"); !errors.Is(err, localcloud.ErrNotFound) {
		t.Errorf("cloud machine after delete: %v, want ErrNotFound", err)
	}
	testenv.Eventually(t, wait, func() bool { return me.machineEvents("demo", events.VerbMachineDeleted) >= 1 }, "machine.deleted published")
}

func TestLocalMachine_WithoutALocalCloud_IsNotProvisionedAndSaysWhy(t *testing.T) {
	me := newMachinesEnv(t)
	me.start(func(c *infrad.Config) { c.ManagementKubeconfig = me.mgmt.KubeconfigPath })
	me.createCluster("demo", api.SingleReplica, api.PlatformLocal)
	me.createMachine("demo", "workers", "workers-a", []byte("stub"))
	lm := me.localMachine("demo", "workers-a", "says there is no local cloud", func(lm *infrav1.LocalMachine) bool {
		return readyReason(lm) == infrav1.ReasonNoLocalCloud
	})
	if isProvisioned(lm) || len(lm.Finalizers) > 0 {
		t.Errorf("provisioned %v, finalizers %v; want neither without a local cloud", isProvisioned(lm), lm.Finalizers)
	}
	// It can go at once: nothing holds it.
	if err := me.kube.Delete(t.Context(), lm); err != nil {
		t.Fatal(err)
	}
	me.waitGone(lm, "LocalMachine")
}

func TestRestart_KeepsEveryMachine(t *testing.T) {
	me := newMachinesEnv(t)
	first := me.startDemo()
	ctx := t.Context()
	names := []string{"workers-a", "workers-b"}
	for _, n := range names {
		me.createMachine("demo", "workers", n, []byte("stub-"+n))
		me.localMachine("demo", n, "provisioned", isProvisioned)
		// Powered off, a machine's cloud record no longer changes by itself.
		if _, err := me.cloud.Fault(ctx, "demo", n, api.FaultCrash); err != nil {
			t.Fatal(err)
		}
		me.localMachine("demo", n, "reports Stopped", func(lm *infrav1.LocalMachine) bool {
			return lm.Status.State == localcloud.StateStopped && lm.Status.Fault == api.FaultCrash
		})
	}
	before, err := me.cloud.List(ctx, "demo")
	if err != nil || len(before) != 2 {
		t.Fatalf("cloud machines before the restart: %v %+v", err, before)
	}
	var lmsBefore infrav1.LocalMachineList
	if err := me.kube.List(ctx, &lmsBefore, crclient.InNamespace(api.ControlPlaneNamespace("demo"))); err != nil {
		t.Fatal(err)
	}

	created := me.machineEvents("demo", events.VerbMachineCreated)
	first.stop()
	second := me.startInfrad()
	// The new infrad reconciled both machines (its gauge counts them) ...
	testenv.Eventually(t, wait, func() bool {
		v, ok := testenv.Metric(t, second.registry, provider.MetricMachines, map[string]string{"cluster": "demo", "phase": localcloud.StateStopped})
		return ok && v == 2
	}, "the new infrad sees both machines Stopped")

	// ... and changed nothing: the same cloud machines, the same LocalMachines.
	after, err := me.cloud.List(ctx, "demo")
	if err != nil || len(after) != len(before) {
		t.Fatalf("cloud machines after the restart: %v %+v", err, after)
	}
	for i := range before {
		b, a := before[i], after[i]
		if a.Name != b.Name || !a.CreatedAt.Equal(b.CreatedAt) || a.Boots != b.Boots || a.State != b.State {
			t.Errorf("cloud machine %s: before %+v, after %+v", b.Name, b, a)
		}
	}
	var lmsAfter infrav1.LocalMachineList
	if err := me.kube.List(ctx, &lmsAfter, crclient.InNamespace(api.ControlPlaneNamespace("demo"))); err != nil {
		t.Fatal(err)
	}
	for i, b := range lmsBefore.Items {
		if a := lmsAfter.Items[i]; a.Name != b.Name || a.ResourceVersion != b.ResourceVersion {
			t.Errorf("LocalMachine %s changed across the restart: resourceVersion %s → %s", b.Name, b.ResourceVersion, a.ResourceVersion)
		}
	}
	if n := me.machineEvents("demo", events.VerbMachineCreated); n != created || n < 2 {
		t.Errorf("machine.created published %d times, %d before the restart; want no new one", n, created)
	}
}

func TestFaultRoute_ValidatesThenInjectsTheFaultInTheLocalCloud(t *testing.T) {
	me := newMachinesEnv(t)
	d := me.startDemo()
	ctx := t.Context()
	me.createCluster("bare", api.SingleReplica, api.PlatformNone)
	me.createMachine("demo", "workers", "workers-a", []byte("stub"))
	me.localMachine("demo", "workers-a", "provisioned", isProvisioned)

	url := func(cluster, machine string) string {
		return d.url + "/v1/clusters/" + cluster + "/machines/" + machine + "/fault"
	}
	for _, tc := range []struct {
		name, url, body string
		code            int
		field           string // the field a 400 names
	}{
		{name: "unknown fault type", url: url("demo", "workers-a"), body: `{"type":"Reboot"}`, code: http.StatusBadRequest, field: "type"},
		{name: "missing type", url: url("demo", "workers-a"), body: `{}`, code: http.StatusBadRequest, field: "type"},
		{name: "unknown field", url: url("demo", "workers-a"), body: `{"kind":"Crash"}`, code: http.StatusBadRequest, field: "kind"},
		{name: "unknown machine", url: url("demo", "workers-zz"), body: `{"type":"Crash"}`, code: http.StatusNotFound},
		{name: "unknown cluster", url: url("nope", "workers-a"), body: `{"type":"Crash"}`, code: http.StatusNotFound},
		{name: "platform none", url: url("bare", "workers-a"), body: `{"type":"Crash"}`, code: http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p httpapi.Problem
			if code := send(t, http.MethodPost, tc.url, tc.body, &p); code != tc.code {
				t.Fatalf("answer %d %+v, want %d", code, p, tc.code)
			}
			if tc.field != "" && !slices.ContainsFunc(p.Errors, func(f api.FieldError) bool { return f.Field == tc.field }) {
				t.Errorf("problem %+v does not name the field %q", p, tc.field)
			}
		})
	}
	if st, err := me.cloud.Get(ctx, "demo", "workers-a"); err != nil || st.Fault != "" {
		t.Fatalf("a refused request faulted the machine: %+v %v", st, err)
	}

	var got api.Machine
	if code := send(t, http.MethodPost, url("demo", "workers-a"), `{"type":"Crash"}`, &got); code != http.StatusAccepted {
		t.Fatalf("valid fault: %d %+v", code, got)
	}
	if got.Name != "workers-a" || got.Fault != api.FaultCrash || got.NodePool != "workers" {
		t.Errorf("202 answered %+v", got)
	}
	st, err := me.cloud.Get(ctx, "demo", "workers-a")
	if err != nil || st.Fault != api.FaultCrash || st.State != localcloud.StateStopped {
		t.Errorf("the cloud reports %+v (%v), want fault Crash and Stopped", st, err)
	}
	testenv.Eventually(t, wait, func() bool { return me.machineEvents("demo", events.VerbMachineFaulted) == 1 }, "machine.faulted published")
	var list api.MachineList
	testenv.Eventually(t, wait, func() bool {
		return send(t, http.MethodGet, d.url+"/v1/clusters/demo/machines", "", &list) == http.StatusOK &&
			len(list.Items) == 1 && list.Items[0].Fault == api.FaultCrash
	}, "GET machines reports the fault")
}
