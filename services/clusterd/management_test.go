package clusterd

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/clusterd/controlplane"
)

// The management objects, read back unstructured: the test sees the JSON the apiserver
// stored, not clusterd's Go types.
var (
	clusterResource            = clusterv1.GroupVersion.WithResource("clusters")
	hostedControlPlaneResource = controlplane.GroupVersion.WithResource("hostedcontrolplanes")
)

// mgmtEnv is clusterd with a real management kube-apiserver holding Cluster API's CRDs,
// plus stand-ins for nodepoold and ignitiond.
type mgmtEnv struct {
	*env
	cs        *kubernetes.Clientset
	dyn       dynamic.Interface
	nodepools *store.Store[api.NodePool]
	ignition  *store.Store[api.IgnitionServer]
}

func startManaged(t *testing.T) *mgmtEnv {
	t.Helper()
	mgmt := testenv.KubeAPIServer(t)
	if err := crd.Install(t.Context(), mgmt.RESTConfig, capi.CRDs, "test"); err != nil {
		t.Fatal(err)
	}
	cs, err := mgmt.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(mgmt.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, mgmt.KubeconfigPath)
	return &mgmtEnv{env: e, cs: cs, dyn: dyn,
		nodepools: store.New[api.NodePool](e.bucket(bus.BucketNodePools)),
		ignition:  store.New[api.IgnitionServer](e.bucket(bus.BucketIgnition)),
	}
}

// object returns the management object, or nil once it does not exist.
func (m *mgmtEnv) object(gvr schema.GroupVersionResource, cluster string) *unstructured.Unstructured {
	m.t.Helper()
	u, err := m.dyn.Resource(gvr).Namespace(api.ControlPlaneNamespace(cluster)).Get(m.t.Context(), cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		m.t.Fatal(err)
	}
	return u
}

func (m *mgmtEnv) secret(cluster string) *corev1.Secret {
	m.t.Helper()
	s, err := m.cs.CoreV1().Secrets(api.ControlPlaneNamespace(cluster)).Get(m.t.Context(), api.KubeconfigSecretName(cluster), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		m.t.Fatal(err)
	}
	return s
}

// field reads a nested field of u (nil when absent).
func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

func checkLabels(t *testing.T, what string, got map[string]string, cluster string) {
	t.Helper()
	for k, v := range map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster, clusterv1.ClusterNameLabel: cluster} {
		if got[k] != v {
			t.Errorf("%s: label %s=%q, want %q (labels %v)", what, k, got[k], v, got)
		}
	}
}

func TestManagement_WritesClusterAPIObjectsAndDeletesThemOnceTheNodePoolsAreGone(t *testing.T) {
	m := startManaged(t)
	ctx := context.Background()
	const name = "demo"
	m.create(name, "1.34.4")
	m.putInfra(name, true)
	m.putPKI(name, []byte(adminKubeconfig))
	m.putControlPlane(name, "1.34.4")
	m.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, "")

	// Available does not wait for the ignition server.
	if c := m.condition(name, api.ConditionIgnitionEndpointAvailable); c.Status != api.ConditionFalse {
		t.Fatalf("IgnitionEndpointAvailable before ignitiond reported: %+v", c)
	}

	var hcp, cl *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, func() bool {
		hcp, cl = m.object(hostedControlPlaneResource, name), m.object(clusterResource, name)
		return hcp != nil && cl != nil && field(hcp, "status", "version") == "v1.34.4" && m.secret(name) != nil &&
			field(hcp, "spec", "controlPlaneEndpoint", "port") != nil && field(cl, "spec", "controlPlaneEndpoint") != nil
	}, "HostedControlPlane, Cluster and kubeconfig Secret written")

	ns, err := m.cs.CoreV1().Namespaces().Get(ctx, api.ControlPlaneNamespace(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, "namespace", ns.Labels, name)

	s := m.secret(name)
	if s == nil {
		t.Fatal("no kubeconfig Secret")
	}
	checkLabels(t, "kubeconfig Secret", s.Labels, name)
	if s.Type != KubeconfigSecretType {
		t.Errorf("Secret type %q", s.Type)
	}
	kc, err := clientcmd.Load(s.Data[KubeconfigSecretKey])
	if err != nil || kc.Clusters[name] == nil || kc.Clusters[name].Server != "https://127.0.0.1:36443" {
		t.Fatalf("the Secret's kubeconfig: %v %+v", err, kc)
	}

	checkLabels(t, "HostedControlPlane", hcp.GetLabels(), name)
	for path, want := range map[string]any{
		"spec.version":                                  "v1.34.4",
		"spec.controlPlaneEndpoint.host":                "127.0.0.1",
		"spec.controlPlaneEndpoint.port":                int64(36443),
		"status.externalManagedControlPlane":            true,
		"status.initialization.controlPlaneInitialized": true,
		"status.version":                                "v1.34.4",
		"status.readyReplicas":                          int64(1),
	} {
		if got := field(hcp, strings.Split(path, ".")...); !reflect.DeepEqual(got, want) {
			t.Errorf("HostedControlPlane %s = %#v, want %#v", path, got, want)
		}
	}
	conds, _ := field(hcp, "status", "conditions").([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != "Available" || conds[0].(map[string]any)["status"] != "True" ||
		conds[0].(map[string]any)["message"] != "" {
		t.Errorf("HostedControlPlane conditions %v", conds)
	}

	checkLabels(t, "Cluster", cl.GetLabels(), name)
	for path, want := range map[string]any{
		"spec.controlPlaneRef":                    map[string]any{"apiGroup": api.ControlPlaneGroup, "kind": controlplane.KindHostedControlPlane, "name": name},
		"spec.infrastructureRef":                  map[string]any{"apiGroup": api.InfrastructureGroup, "kind": api.KindLocalCluster, "name": name},
		"spec.clusterNetwork.pods.cidrBlocks":     []any{api.DefaultPodCIDR},
		"spec.clusterNetwork.services.cidrBlocks": []any{api.DefaultServiceCIDR},
		"spec.controlPlaneEndpoint":               map[string]any{"host": "127.0.0.1", "port": int64(36443)},
	} {
		if got := field(cl, strings.Split(path, ".")...); !reflect.DeepEqual(got, want) {
			t.Errorf("Cluster %s = %#v, want %#v", path, got, want)
		}
	}

	// A new PKI serial refreshes the kubeconfig Secret.
	renewed := strings.Replace(adminKubeconfig, "36443", "36444", 1)
	p := &api.ClusterPKI{Serial: "2", Ready: true, Kubeconfigs: map[string][]byte{api.KubeconfigAdmin: m.seal.Seal([]byte(renewed))}}
	p.Name = name
	m.put(ctx, events.ResourcePKI, events.VerbPKIRotated, name, name, func() error { return upsert(ctx, m.pki, name, p) })
	testenv.Eventually(t, 30*time.Second, func() bool {
		s := m.secret(name)
		return s != nil && strings.Contains(string(s.Data[KubeconfigSecretKey]), "36444") && s.Annotations[AnnotationPKISerial] == "2"
	}, "the kubeconfig Secret follows the PKI serial")

	// ignitiond's server: the condition and the endpoint.
	srv := &api.IgnitionServer{Endpoint: "127.0.0.1:7443", Ready: true}
	srv.Name = name
	m.put(ctx, events.ResourceIgnition, events.VerbIgnitionServer, name, name, func() error { return upsert(ctx, m.ignition, name, srv) })
	m.waitCondition(name, api.ConditionIgnitionEndpointAvailable, api.ConditionTrue, "127.0.0.1:7443")
	if got := m.get(name).Status.IgnitionEndpoint; got != "127.0.0.1:7443" {
		t.Fatalf("status.ignitionEndpoint %q", got)
	}

	// A node pool (and its token record) holds the Cluster API objects back.
	pool := &api.NodePool{}
	pool.Name = "workers"
	poolKey := name + ".workers"
	m.put(ctx, events.ResourceNodePool, events.VerbNodePoolCreated, name, name+"/workers", func() error { return upsert(ctx, m.nodepools, poolKey, pool) })
	tokens := &api.IgnitionServer{} // any value: clusterd only counts the key
	m.put(ctx, events.ResourceIgnition, events.VerbIgnitionReady, name, name+"/workers", func() error { return upsert(ctx, m.ignition, poolKey, tokens) })

	if status, _, body := m.do(http.MethodDelete, "/v1/clusters/"+name, "", ""); status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", status, body)
	}
	m.waitCondition(name, api.ConditionDeleting, api.ConditionTrue, "waiting for 1 node pool to be deleted (workers); waiting for ignitiond to remove 2 ignition records")
	if cl := m.object(clusterResource, name); cl == nil || cl.GetDeletionTimestamp() != nil {
		t.Fatalf("the Cluster was deleted while a node pool was left: %v", cl)
	}

	m.remove(events.ResourceNodePool, name, poolKey, m.nodepools)
	m.waitCondition(name, api.ConditionDeleting, api.ConditionTrue, "waiting for ignitiond to remove 2 ignition records")
	if m.object(clusterResource, name) == nil {
		t.Fatal("the Cluster was deleted while ignition records were left")
	}
	m.remove(events.ResourceIgnition, name, poolKey, m.ignition)
	m.remove(events.ResourceIgnition, name, name, m.ignition)

	testenv.Eventually(t, 30*time.Second, func() bool {
		return m.object(clusterResource, name) == nil && m.object(hostedControlPlaneResource, name) == nil && m.secret(name) == nil
	}, "Cluster, HostedControlPlane and kubeconfig Secret deleted")
	if m.get(name) == nil {
		t.Fatal("the cluster went before infrad, pkid and componentd released it")
	}

	m.remove(events.ResourceInfra, name, name, m.infra)
	m.remove(events.ResourcePKI, name, name, m.pki)
	for _, c := range components {
		m.remove(events.ResourceComponent, name, name+"."+c, m.components)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return m.get(name) == nil }, "cluster gone")
	ns, err = m.cs.CoreV1().Namespaces().Get(ctx, api.ControlPlaneNamespace(name), metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Fatal("the namespace is left behind")
	}
}
