package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/leaderendpoint"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/clusterd/crds"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
	"github.com/hostplane/hostplane/services/infrad/provider"
)

// The kustomizations of deploy/k8s, relative to it.
var manifestVariants = []string{"base", "overlays/dev", "overlays/production"}

// The namespace the manifests install into.
const manifestNamespace = "hostplane-system"

// Each daemon's admin port (API, /healthz, /readyz, /metrics) in deploy/k8s.
var daemonPorts = map[string]int64{
	"clusterd": 8081, "nodepoold": 8082, "componentd": 8083,
	"pkid": 8084, "infrad": 8085, "ignitiond": 8086,
}

// The ServiceMonitor and PrometheusRule CRDs come from prometheus-operator's module, at this
// version, through the Go module proxy (or the module cache).
const (
	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.85.0"
	promOperatorCRDDir  = "example/prometheus-operator-crd"
)

// The prometheus-operator kinds the manifests use: kind → plural.
var promOperatorKinds = map[string]string{"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}

// TestManifestsPolicy checks what an operator relies on in every variant of deploy/k8s: each
// daemon runs with probes, requests and a locked-down container on the port its Service, its
// ServiceMonitor and the NetworkPolicies use; each has its own ServiceAccount bound only to
// its own ClusterRole; no ClusterRole grants wildcards.
func TestManifestsPolicy(t *testing.T) {
	for _, variant := range manifestVariants {
		t.Run(variant, func(t *testing.T) {
			objs := renderManifests(t, variant)
			idx := indexObjects(objs)
			for daemon, port := range daemonPorts {
				t.Run(daemon, func(t *testing.T) { checkDaemon(t, idx, daemon, port) })
			}
			t.Run("rbac", func(t *testing.T) { checkRBAC(t, idx) })
			t.Run("nats", func(t *testing.T) { checkNATS(t, idx) })
			t.Run("management-kubeconfig", func(t *testing.T) { checkManagementKubeconfig(t, idx) })
			t.Run("gateway", func(t *testing.T) {
				gw := typed[appsv1.Deployment](t, idx.get(t, "Deployment", "gateway")).Spec.Template
				checkAdminTLS(t, gw.Spec, gw.Spec.Containers[0], "gateway")
			})
			t.Run("no-key-material", func(t *testing.T) { checkNoKeyMaterial(t, idx) })
		})
	}
}

// TestManifestsServerDryRun applies every object of every variant to a real management
// kube-apiserver with server-side apply and dryRun=All, the way `kubectl apply --server-side
// --dry-run=server -k` does, then checks that each daemon's ServiceAccount may do what its
// code does in the management cluster, and no more.
func TestManifestsServerDryRun(t *testing.T) {
	kc := testenv.KubeAPIServer(t)
	admin := kc.RESTConfig
	// Each step has its own minute: on a busy machine the dry runs of every variant took most
	// of one shared minute and left the CRD installs none (context deadline exceeded).
	step := ctx
	ctx := step(t)

	dyn, mapper := prepareForManifests(ctx, t, admin)

	// The namespace and the RBAC objects are applied for real: namespaced objects need their
	// namespace, and the access checks below need the bindings.
	base := renderManifests(t, "base")
	for _, o := range base {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := applyObject(ctx, dyn, mapper, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, variant := range manifestVariants {
		t.Run(variant, func(t *testing.T) {
			ctx := step(t)
			objs := renderManifests(t, variant)
			for _, o := range objs {
				if err := applyObject(ctx, dyn, mapper, o, true); err != nil {
					t.Error(err)
				}
			}
			t.Logf("%d objects accepted by the apiserver (dry run)", len(objs))
		})
	}

	t.Run("access", func(t *testing.T) { checkAccess(t, admin) })
	t.Run("crd-install", func(t *testing.T) {
		ctx := step(t)
		// The daemons that install CRDs do so with their own ServiceAccount; nodepoold first:
		// it owns Cluster API's Machine CRD, which infrad waits for.
		install := map[string]fs.FS{"nodepoold": capi.CRDs, "clusterd": crds.FS, "infrad": provider.CRDs}
		for _, d := range []string{"nodepoold", "clusterd", "infrad"} {
			if err := crd.Install(ctx, impersonate(admin, d), install[d], d); err != nil {
				t.Errorf("%s installs its CRDs with its ServiceAccount: %v", d, err)
			}
		}
	})
}

// prepareForManifests installs what a management cluster provides before hostplane is
// installed, prometheus-operator's ServiceMonitor and PrometheusRule kinds, and returns the
// clients applyObject needs.
func prepareForManifests(ctx context.Context, t *testing.T, admin *rest.Config) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper) {
	t.Helper()
	if err := crd.Install(ctx, admin, promOperatorCRDFS(t), "prometheus-operator"); err != nil {
		t.Fatalf("install the prometheus-operator CRDs: %v", err)
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return dyn, mapper
}

// renderManifests builds deploy/k8s/<variant> with kustomize, as `kubectl kustomize` does.
func renderManifests(t *testing.T, variant string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "k8s", filepath.FromSlash(variant)))
	if err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", variant, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("%s: %s: %v", variant, r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s: no objects", variant)
	}
	return objs
}

// applyObject applies o with server-side apply (dryRun=All when dryRun), as the
// kubectl field manager of an operator would.
func applyObject(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	what := gvk.Kind + " " + o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		what = gvk.Kind + " " + ns + "/" + o.GetName()
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) { // a CRD installed after discovery was cached
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s: the apiserver serves no %s: %w", what, gvk, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return fmt.Errorf("%s: namespaced, but the manifests give it no namespace", what)
		}
		ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "kubectl", Force: ptrTo(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts); err != nil {
		return fmt.Errorf("%s: the apiserver rejected it: %w", what, err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// impersonate returns admin's config acting as the ServiceAccount of daemon.
func impersonate(admin *rest.Config, daemon string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccountUser(daemon),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + manifestNamespace, "system:authenticated"},
	}
	return cfg
}

func serviceAccountUser(daemon string) string {
	return "system:serviceaccount:" + manifestNamespace + ":" + daemon
}

// promOperatorCRDFS holds prometheus-operator's ServiceMonitor and PrometheusRule CRDs from its
// module (downloaded through the Go module proxy into the module cache once). Without the go
// command or the network they are minimal structural CRDs of the same kinds, and the test says
// so.
func promOperatorCRDFS(t *testing.T) fs.FS {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", promOperatorModule+"@"+promOperatorVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && mod.Error != "" {
		err = fmt.Errorf("%s", mod.Error)
	}
	crds := fstest.MapFS{}
	for kind, plural := range promOperatorKinds {
		var b []byte
		if err == nil {
			b, err = os.ReadFile(filepath.Join(mod.Dir, filepath.FromSlash(promOperatorCRDDir), "monitoring.coreos.com_"+plural+".yaml"))
		}
		if err != nil {
			t.Logf("prometheus-operator %s is not available (%v %s): using a minimal %s CRD that accepts any spec", promOperatorVersion, err, stderr.String(), kind)
			b = []byte(minimalPromOperatorCRD(kind, plural))
		}
		crds[plural+".yaml"] = &fstest.MapFile{Data: b}
	}
	return crds
}

func minimalPromOperatorCRD(kind, plural string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ` + kind + `, listKind: ` + kind + `List, plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`
}

// A check of one management-cluster request a daemon's code makes (allowed) or must not be
// able to make (denied).
type access struct {
	daemon               string
	verb                 string
	group, resource, sub string
	namespace, name      string
	allowed              bool
}

// checkAccess asks the apiserver (SubjectAccessReview) whether each daemon's ServiceAccount
// may make the requests its code makes in the management cluster, and may not make others.
func checkAccess(t *testing.T, admin *rest.Config) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "hostplane-demo" // a cluster's control-plane namespace
	capi, hcp, infra := "cluster.x-k8s.io", "controlplane.hostplane.dev", "infrastructure.hostplane.dev"
	checks := []access{
		// clusterd: namespace, kubeconfig Secret, HostedControlPlane (+status), CAPI Cluster.
		{"clusterd", "patch", "", "namespaces", "", "", ns, true},
		{"clusterd", "delete", "", "namespaces", "", "", ns, true},
		{"clusterd", "patch", "", "secrets", "", ns, "demo-kubeconfig", true},
		{"clusterd", "patch", hcp, "hostedcontrolplanes", "", ns, "demo", true},
		{"clusterd", "patch", hcp, "hostedcontrolplanes", "status", ns, "demo", true},
		{"clusterd", "delete", capi, "clusters", "", ns, "demo", true},
		{"clusterd", "get", "", "secrets", "", ns, "demo-kubeconfig", false},
		{"clusterd", "patch", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "machines.cluster.x-k8s.io", false},
		{"clusterd", "create", capi, "machinedeployments", "", ns, "", false},
		// nodepoold: its pools' objects and Cluster API's controllers.
		{"nodepoold", "patch", capi, "machinedeployments", "", ns, "workers", true},
		{"nodepoold", "watch", capi, "machines", "", "", "", true},
		{"nodepoold", "update", capi, "machines", "finalizers", ns, "workers-abc", true},
		{"nodepoold", "patch", "", "secrets", "", ns, "workers-userdata", true},
		{"nodepoold", "create", infra, "localmachines", "", ns, "", true},
		{"nodepoold", "delete", hcp, "hostedcontrolplanes", "", ns, "demo", true},
		{"nodepoold", "create", "", "events", "", ns, "", true},
		{"nodepoold", "create", capi, "clusters", "", ns, "", false},
		{"nodepoold", "delete", "", "namespaces", "", "", ns, false},
		// componentd: the control plane's workloads.
		{"componentd", "patch", "apps", "statefulsets", "", ns, "etcd", true},
		{"componentd", "delete", "apps", "deployments", "", ns, "kube-apiserver", true},
		{"componentd", "list", "policy", "poddisruptionbudgets", "", ns, "", true},
		{"componentd", "patch", "", "services", "", ns, "kube-apiserver", true},
		{"componentd", "patch", "", "secrets", "", ns, "etcd-server", true},
		{"componentd", "list", "", "pods", "", ns, "", true},
		{"componentd", "create", "", "pods", "", ns, "", false},
		{"componentd", "delete", "", "pods", "", ns, "etcd-0", false},
		{"componentd", "get", capi, "clusters", "", ns, "demo", false},
		// pkid: reads a Machine before approving its kubelet's CSR; nothing else.
		{"pkid", "get", capi, "machines", "", ns, "workers-abc", true},
		{"pkid", "list", capi, "machines", "", ns, "", false},
		{"pkid", "get", "", "secrets", "", ns, "demo-kubeconfig", false},
		// infrad: its CRDs, LocalClusters and LocalMachines, Machines on termination notices.
		{"infrad", "get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "machines.cluster.x-k8s.io", true},
		{"infrad", "create", "", "namespaces", "", "", "", true},
		{"infrad", "patch", infra, "localclusters", "status", ns, "demo", true},
		{"infrad", "patch", infra, "localmachines", "", ns, "workers-abc", true},
		{"infrad", "delete", capi, "machines", "", ns, "workers-abc", true},
		{"infrad", "get", "", "secrets", "", ns, "workers-userdata", true},
		{"infrad", "list", "", "secrets", "", ns, "", false},
		{"infrad", "delete", "", "namespaces", "", "", ns, false},
		// infrad's and ignitiond's leaders keep their endpoints Service's one slice; nothing
		// else of the kind, and no other daemon.
		{"infrad", "patch", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "infrad-endpoints-leader", true},
		{"infrad", "create", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "", true},
		{"infrad", "patch", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "ignitiond-endpoints-leader", false},
		{"infrad", "patch", "discovery.k8s.io", "endpointslices", "", ns, "infrad-endpoints-leader", false},
		{"ignitiond", "patch", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "ignitiond-endpoints-leader", true},
		{"ignitiond", "patch", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "infrad-endpoints-leader", false},
		{"clusterd", "patch", "discovery.k8s.io", "endpointslices", "", manifestNamespace, "infrad-endpoints-leader", false},
		// ignitiond uses the management cluster for nothing else; the gateway not at all.
		{"ignitiond", "get", "", "secrets", "", ns, "demo-kubeconfig", false},
		{"gateway", "list", "", "services", "", manifestNamespace, "", false},
	}
	// Nobody can grant themselves more.
	for d := range daemonPorts {
		checks = append(checks,
			access{d, "create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "", false},
			access{d, "escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "hostplane-" + d, false},
			access{d, "impersonate", "", "serviceaccounts", "", manifestNamespace, "", false})
	}
	for _, c := range checks {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceAccountUser(c.daemon),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + manifestNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub,
				Namespace: c.namespace, Name: c.name,
			},
		}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != c.allowed {
			r := c.resource
			if c.sub != "" {
				r += "/" + c.sub
			}
			if c.group != "" {
				r += "." + c.group
			}
			t.Errorf("%s may %s %s %s/%s: %v, want %v", c.daemon, c.verb, r, c.namespace, c.name, got.Status.Allowed, c.allowed)
		}
	}
}

// objectIndex finds the rendered objects by kind and name; generated names (ConfigMaps with
// a hash suffix) by their prefix.
type objectIndex struct {
	objs []*unstructured.Unstructured
}

func indexObjects(objs []*unstructured.Unstructured) objectIndex { return objectIndex{objs: objs} }

func (x objectIndex) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range x.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
	return nil
}

func (x objectIndex) generated(t *testing.T, kind, prefix string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range x.objs {
		if o.GetKind() == kind && (o.GetName() == prefix || strings.HasPrefix(o.GetName(), prefix+"-")) {
			return o
		}
	}
	t.Fatalf("no %s %s(-<hash>) in the manifests", kind, prefix)
	return nil
}

func (x objectIndex) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range x.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed converts a rendered object into its API type.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(l))
}

// checkReplicas: two or more pods, one leading through the lease, the other standing by,
// both Ready (docs/resilience.md): each pod elects under its own name, a rolling update never
// leaves the daemon without a pod, and the pods prefer different nodes.
func checkReplicas(t *testing.T, dep *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want 2 or more (one leads, one stands by)", dep.Spec.Replicas)
	}
	if st := dep.Spec.Strategy; st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil ||
		st.RollingUpdate.MaxUnavailable == nil || st.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy %+v, want RollingUpdate with maxUnavailable 0", st)
	}
	var id *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "HOSTPLANE_REPLICA_ID" {
			id = &c.Env[i]
		}
	}
	if id == nil || id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("HOSTPLANE_REPLICA_ID = %+v, want the pod's name (fieldRef metadata.name)", id)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz (a healthy replica, leading or standing by, is Ready)", p)
	}
	if a := dep.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Error("no pod anti-affinity: both replicas may land on one node")
	}
}

func checkDaemon(t *testing.T, idx objectIndex, daemon string, port int64) {
	dep := typed[appsv1.Deployment](t, idx.get(t, "Deployment", daemon))
	pod := dep.Spec.Template
	if pod.Spec.ServiceAccountName != daemon {
		t.Errorf("runs as ServiceAccount %q, want its own %q", pod.Spec.ServiceAccountName, daemon)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod does not require a non-root user (runAsNonRoot)")
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if !strings.HasPrefix(c.Image, "hostplane/"+daemon+":") {
		t.Errorf("image %q, want hostplane/%s:<tag>", c.Image, daemon)
	}
	checkReplicas(t, dep, c)
	var admin *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == "admin" {
			admin = &c.Ports[i]
		}
	}
	if admin == nil || int64(admin.ContainerPort) != port {
		t.Errorf("container port admin = %v, want %d", admin, port)
	}
	addrEnv := "HOSTPLANE_" + strings.ToUpper(daemon) + "_ADDR"
	if v := envValue(c, addrEnv); !strings.HasSuffix(v, ":"+strconv.FormatInt(port, 10)) {
		t.Errorf("%s=%q: the daemon would not listen on the admin port %d", addrEnv, v, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s probe %+v, want GET %s on port admin", p.name, p.probe, p.path)
		} else if p.probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s probe scheme %q, want HTTPS: the admin port serves HTTPS only", p.name, p.probe.HTTPGet.Scheme)
		}
	}
	checkAdminTLS(t, pod.Spec, c, daemon)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Error("no memory limit")
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v, want a read-only root, no privilege escalation, ALL capabilities dropped", sc)
	}

	svc := typed[corev1.Service](t, idx.get(t, "Service", daemon))
	if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, pod.Labels) {
		t.Error("the Service does not select the daemon's pods")
	}
	if len(svc.Spec.Ports) != 1 || int64(svc.Spec.Ports[0].Port) != port || svc.Spec.Ports[0].TargetPort.String() != "admin" {
		t.Errorf("Service ports %+v, want %d -> admin", svc.Spec.Ports, port)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None: the gateway resolves the name to every replica and routes to the leader (/leaderz)", svc.Spec.ClusterIP)
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, idx.get(t, "PodDisruptionBudget", daemon))
	if !selects(t, pdb.Spec.Selector, pod.Labels) {
		t.Error("the PodDisruptionBudget does not select the daemon's pods")
	}
	sm := idx.get(t, "ServiceMonitor", daemon)
	smSel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !selects(t, &metav1.LabelSelector{MatchLabels: smSel}, svc.Labels) {
		t.Error("the ServiceMonitor does not select the daemon's Service")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "admin" || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want /metrics on port admin", eps)
	} else if ep := eps[0].(map[string]any); ep["scheme"] != "https" {
		t.Errorf("ServiceMonitor scheme %v, want https: the admin port serves HTTPS only", ep["scheme"])
	} else if ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name"); ca != "mgmt-tls-"+daemon {
		t.Errorf("ServiceMonitor verifies the daemon with the Secret %q, want mgmt-tls-%s (the management CA)", ca, daemon)
	} else if tok, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name"); tok != "hostplane-metrics-token" {
		t.Errorf("ServiceMonitor scrapes with the Secret %q, want hostplane-metrics-token: /metrics answers a token only", tok)
	}
	// /metrics answers the metrics token (hostplane credentials k8s-secrets), which the
	// daemon reads from the Secret mounted in it; without it a standalone daemon's /metrics
	// answers no token at all.
	if f := envValue(c, "HOSTPLANE_METRICS_TOKEN_FILE"); !mountsSecretKey(pod.Spec, c, f, "hostplane-metrics-token", "token") {
		t.Errorf("HOSTPLANE_METRICS_TOKEN_FILE=%q is not the key token of the Secret hostplane-metrics-token mounted in the container", f)
	}
	if v := envValue(c, "HOSTPLANE_METRICS_REQUIRE_AUTH"); v != "" {
		t.Errorf("HOSTPLANE_METRICS_REQUIRE_AUTH=%q: /metrics must keep needing a token", v)
	}
	// The gateway and Prometheus may reach the admin port; the daemon may reach NATS.
	gateway := typed[appsv1.Deployment](t, idx.get(t, "Deployment", "gateway")).Spec.Template.Labels
	if !ingressAllowed(t, idx, pod.Labels, gateway, port) {
		t.Errorf("no NetworkPolicy lets the gateway reach port %d", port)
	}
	if v := envValue(typed[appsv1.Deployment](t, idx.get(t, "Deployment", "gateway")).Spec.Template.Spec.Containers[0],
		"HOSTPLANE_GATEWAY_"+strings.ToUpper(daemon)+"_URL"); v != fmt.Sprintf("https://%s:%d", daemon, port) {
		t.Errorf("the gateway routes to %q, want https://%s:%d", v, daemon, port)
	}
	// The seal key, where the daemon opens sealed PKI, comes from the Secret
	// hostplane-seal-key (hostplane credentials k8s-secrets), never from a manifest.
	if f := envValue(c, "HOSTPLANE_PKI_KEY_FILE"); f != "" && !mountsSecretKey(pod.Spec, c, f, "hostplane-seal-key", "pki.key") {
		t.Errorf("HOSTPLANE_PKI_KEY_FILE=%q is not the key pki.key of the Secret hostplane-seal-key mounted in the container", f)
	}
	nats := typed[appsv1.StatefulSet](t, idx.get(t, "StatefulSet", "nats")).Spec.Template.Labels
	if !ingressAllowed(t, idx, nats, pod.Labels, 4222) {
		t.Error("no NetworkPolicy lets the daemon reach NATS on 4222")
	}
	// NATS: the daemon proves its own identity, and holds no other identity's seed.
	if f := envValue(c, "HOSTPLANE_NATS_NKEY_FILE"); !mountsSecretKey(pod.Spec, c, f, "nats-creds-"+daemon, "nkey") {
		t.Errorf("HOSTPLANE_NATS_NKEY_FILE=%q is not the key nkey of the Secret nats-creds-%s mounted in the container", f, daemon)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, "nats-") && v.Secret.SecretName != "nats-creds-"+daemon {
			t.Errorf("mounts the Secret %s: a daemon holds only its own NATS seed", v.Secret.SecretName)
		}
	}
	// Over TLS: it verifies the server with the NATS CA from its own Secret.
	if url := natsURL(t, idx, c); !strings.HasPrefix(url, "tls://") {
		t.Errorf("HOSTPLANE_NATS_URL=%q, want tls://: NATS accepts TLS clients only", url)
	}
	if f := envValue(c, "HOSTPLANE_NATS_CA_FILE"); !mountsSecretKey(pod.Spec, c, f, "nats-creds-"+daemon, natsauth.TLSCAFile) {
		t.Errorf("HOSTPLANE_NATS_CA_FILE=%q is not the key %s of the Secret nats-creds-%s mounted in the container", f, natsauth.TLSCAFile, daemon)
	}
}

// checkAdminTLS: the container serves its admin port with the certificate of its own Secret
// mgmt-tls-<name> and verifies clients with the management CA from it (for the gateway:
// verifies the daemons with the CA and presents its client certificate), and mounts no other
// mgmt-tls Secret.
func checkAdminTLS(t *testing.T, pod corev1.PodSpec, c corev1.Container, name string) {
	t.Helper()
	env := map[string]string{"HOSTPLANE_ADMIN_TLS_CERT_FILE": "tls.crt", "HOSTPLANE_ADMIN_TLS_KEY_FILE": "tls.key", "HOSTPLANE_ADMIN_CLIENT_CA_FILE": "ca.crt"}
	if name == "gateway" {
		env = map[string]string{"HOSTPLANE_GATEWAY_CLIENT_CERT_FILE": "tls.crt", "HOSTPLANE_GATEWAY_CLIENT_KEY_FILE": "tls.key", "HOSTPLANE_GATEWAY_BACKEND_CA_FILE": "ca.crt"}
	}
	for v, key := range env {
		if f := envValue(c, v); !mountsSecretKey(pod, c, f, "mgmt-tls-"+name, key) {
			t.Errorf("%s=%q is not the key %s of the Secret mgmt-tls-%s mounted in the container", v, f, key, name)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, "mgmt-tls-") && v.Secret.SecretName != "mgmt-tls-"+name {
			t.Errorf("mounts the Secret %s: a pod holds only its own management certificate", v.Secret.SecretName)
		}
	}
	if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil {
		t.Error("no fsGroup: the non-root container cannot read its mode-0400 Secret files")
	}
}

// natsURL is the NATS URL container c connects to: its own HOSTPLANE_NATS_URL, else the
// hostplane-config ConfigMap's.
func natsURL(t *testing.T, idx objectIndex, c corev1.Container) string {
	t.Helper()
	if v := envValue(c, "HOSTPLANE_NATS_URL"); v != "" {
		return v
	}
	return typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "hostplane-config")).Data["HOSTPLANE_NATS_URL"]
}

// mountsSecretKey reports whether file is, in container c of pod, the key of the Secret
// secret.
func mountsSecretKey(pod corev1.PodSpec, c corev1.Container, file, secret, key string) bool {
	v, rel := mountedVolume(pod, c, file)
	if v == nil || v.Secret == nil || v.Secret.SecretName != secret {
		return false
	}
	return (len(v.Secret.Items) == 0 && rel == key) || hasItem(v.Secret.Items, key, rel)
}

// mountsProjectedSecretKey reports whether file is, in container c of pod, the key of the
// Secret secret in a projected volume.
func mountsProjectedSecretKey(pod corev1.PodSpec, c corev1.Container, file, secret, key string) bool {
	v, rel := mountedVolume(pod, c, file)
	if v == nil || v.Projected == nil {
		return false
	}
	return slices.ContainsFunc(v.Projected.Sources, func(src corev1.VolumeProjection) bool {
		return src.Secret != nil && src.Secret.Name == secret && hasItem(src.Secret.Items, key, rel)
	})
}

// mountedVolume is the volume file lies in, in container c of pod, and file's path in it:
// the deepest mount holding it (a mount inside another hides what is beneath).
func mountedVolume(pod corev1.PodSpec, c corev1.Container, file string) (*corev1.Volume, string) {
	var vol *corev1.Volume
	var path string
	depth := -1
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		rel, ok := strings.CutPrefix(file, dir+"/")
		if !ok || len(dir) <= depth {
			continue
		}
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				vol, path, depth = &pod.Volumes[i], rel, len(dir)
			}
		}
	}
	return vol, path
}

func hasItem(items []corev1.KeyToPath, key, path string) bool {
	return slices.ContainsFunc(items, func(it corev1.KeyToPath) bool { return it.Key == key && it.Path == path })
}

// envValue is the literal value of the container's variable name ("" when unset or taken
// from elsewhere).
func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// ingressAllowed reports whether a NetworkPolicy of the manifests selecting the pods labelled
// to lets the pods labelled from (same namespace) in on TCP port.
func ingressAllowed(t *testing.T, idx objectIndex, to, from map[string]string, port int64) bool {
	t.Helper()
	for _, o := range idx.all("NetworkPolicy") {
		np := typed[networkingv1.NetworkPolicy](t, o)
		if !selects(t, &np.Spec.PodSelector, to) {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				if p.Port == nil {
					portOK = true
					continue
				}
				lo, hi := int64(p.Port.IntValue()), int64(p.Port.IntValue())
				if p.EndPort != nil {
					hi = int64(*p.EndPort)
				}
				portOK = portOK || (port >= lo && port <= hi)
			}
			peerOK := len(rule.From) == 0
			for _, peer := range rule.From {
				peerOK = peerOK || (peer.NamespaceSelector == nil && peer.IPBlock == nil && selects(t, peer.PodSelector, from))
			}
			if portOK && peerOK {
				return true
			}
		}
	}
	return false
}

// autoscalerBinding is the one RBAC access a daemon has: componentd binds, in a control-plane
// namespace, the autoscaler's ServiceAccount to the ClusterRole hostplane-karpenter, and may
// bind no other role (so it cannot grant more than that role).
func autoscalerBinding(clusterRole string, r rbacv1.PolicyRule) bool {
	if clusterRole != "hostplane-componentd" || !slices.Equal(r.APIGroups, []string{"rbac.authorization.k8s.io"}) {
		return false
	}
	switch {
	case slices.Equal(r.Resources, []string{"rolebindings"}):
		return !slices.Contains(r.Verbs, "bind") && !slices.Contains(r.Verbs, "escalate")
	case slices.Equal(r.Resources, []string{"clusterroles"}):
		return slices.Equal(r.Verbs, []string{"bind"}) && slices.Equal(r.ResourceNames, []string{kuberuntime.KarpenterClusterRole})
	}
	return false
}

// checkKarpenterRole: the shipped ClusterRole hostplane-karpenter is what the autoscaler's
// cloud provider does (kuberuntime.KarpenterRules), no more.
func checkKarpenterRole(t *testing.T, idx objectIndex) {
	cr := typed[rbacv1.ClusterRole](t, idx.get(t, "ClusterRole", kuberuntime.KarpenterClusterRole))
	want := kuberuntime.KarpenterRules()
	if len(cr.Rules) != len(want) {
		t.Fatalf("ClusterRole %s has %d rules, want %d: %+v", cr.Name, len(cr.Rules), len(want), cr.Rules)
	}
	for i := range want {
		if !slices.Equal(cr.Rules[i].APIGroups, want[i].APIGroups) || !slices.Equal(cr.Rules[i].Resources, want[i].Resources) ||
			!slices.Equal(cr.Rules[i].Verbs, want[i].Verbs) || len(cr.Rules[i].ResourceNames) > 0 {
			t.Errorf("ClusterRole %s rule %d = %+v, want %+v", cr.Name, i, cr.Rules[i], want[i])
		}
	}
}

func checkRBAC(t *testing.T, idx objectIndex) {
	checkKarpenterRole(t, idx)
	for _, o := range idx.all("ClusterRole") {
		cr := typed[rbacv1.ClusterRole](t, o)
		for _, r := range cr.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || len(r.NonResourceURLs) > 0 {
				t.Errorf("ClusterRole %s grants a wildcard or non-resource URLs: %+v", cr.Name, r)
			}
			if slices.Contains(r.APIGroups, "rbac.authorization.k8s.io") && !autoscalerBinding(cr.Name, r) {
				t.Errorf("ClusterRole %s grants RBAC access: %+v", cr.Name, r)
			}
		}
	}
	// bound counts each ServiceAccount's bindings to its own ClusterRole; leads its bindings
	// to the Role that lets its leader write its endpoints Service's slice, and nothing else.
	bound, leads := map[string]int{}, map[string]int{}
	for _, o := range append(idx.all("ClusterRoleBinding"), idx.all("RoleBinding")...) {
		b := typed[rbacv1.ClusterRoleBinding](t, o)
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Namespace != manifestNamespace {
			t.Errorf("%s %s binds %+v, want exactly one ServiceAccount of %s", o.GetKind(), b.Name, b.Subjects, manifestNamespace)
			continue
		}
		sa := b.Subjects[0].Name
		if o.GetKind() == "RoleBinding" && b.RoleRef.Kind == "Role" && b.RoleRef.Name == "hostplane-"+sa+"-endpoints" {
			leads[sa]++
			checkLeaderEndpointRole(t, typed[rbacv1.Role](t, idx.get(t, "Role", b.RoleRef.Name)), sa)
			continue
		}
		bound[sa]++
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "hostplane-"+sa {
			t.Errorf("%s %s binds ServiceAccount %s to %s %s, want its own ClusterRole hostplane-%s", o.GetKind(), b.Name, sa, b.RoleRef.Kind, b.RoleRef.Name, sa)
		}
		idx.get(t, "ClusterRole", b.RoleRef.Name)
	}
	for d := range daemonPorts {
		idx.get(t, "ServiceAccount", d)
		pod := typed[appsv1.Deployment](t, idx.get(t, "Deployment", d)).Spec.Template.Spec
		token := pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken
		usesManagement := envValue(pod.Containers[0], "HOSTPLANE_MANAGEMENT_KUBECONFIG") != ""
		leader := envValue(pod.Containers[0], "HOSTPLANE_LEADER_SERVICE") != ""
		// A daemon that uses the management cluster has its token and one binding to its own
		// ClusterRole, unless all it does there is keep its leader Service (ignitiond).
		switch {
		case usesManagement && (!token || bound[d] > 1 || (bound[d] == 0 && !leader)):
			t.Errorf("%s uses the management cluster: it needs one binding (has %d; none only if all it does is keep a leader Service: %v) and its token (mounted: %v)", d, bound[d], leader, token)
		case !usesManagement && (bound[d] != 0 || token || leader):
			t.Errorf("%s does not use the management cluster, yet has %d bindings, token mounted: %v, keeps a leader Service: %v", d, bound[d], token, leader)
		}
		if leader != (leads[d] == 1) {
			t.Errorf("%s keeps a leader Service: %v, but its ServiceAccount has %d bindings to hostplane-%s-endpoints", d, leader, leads[d], d)
		}
		if leader {
			svc := typed[corev1.Service](t, idx.get(t, "Service", d+"-endpoints")).Spec
			if svc.ClusterIP != corev1.ClusterIPNone || len(svc.Selector) > 0 || len(svc.Ports) > 0 {
				t.Errorf("Service %s-endpoints: clusterIP %q, selector %v, ports %v; want headless, without selector or ports (its leader writes the one slice)", d, svc.ClusterIP, svc.Selector, svc.Ports)
			}
		}
	}
	if bound["gateway"] != 0 || bound["nats"] != 0 {
		t.Errorf("the gateway or NATS is bound to a role: %v", bound)
	}
}

// checkLeaderEndpointRole: the Role a daemon's leader writes its endpoints Service's slice
// with creates EndpointSlices and reads and patches only that slice.
func checkLeaderEndpointRole(t *testing.T, r *rbacv1.Role, sa string) {
	t.Helper()
	slice := leaderendpoint.SliceName(sa + "-endpoints")
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, ResourceNames: []string{slice}, Verbs: []string{"get", "patch"}},
	}
	if len(r.Rules) != len(want) {
		t.Fatalf("Role %s has rules %+v, want %+v", r.Name, r.Rules, want)
	}
	for i := range want {
		g, w := r.Rules[i], want[i]
		if !slices.Equal(g.APIGroups, w.APIGroups) || !slices.Equal(g.Resources, w.Resources) || !slices.Equal(g.ResourceNames, w.ResourceNames) || !slices.Equal(g.Verbs, w.Verbs) {
			t.Errorf("Role %s rule %d = %+v, want %+v", r.Name, i, g, w)
		}
	}
}

func checkNATS(t *testing.T, idx objectIndex) {
	sts := typed[appsv1.StatefulSet](t, idx.get(t, "StatefulSet", "nats"))
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("NATS runs %v members, want 3", sts.Spec.Replicas)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Error("NATS members have no persistent volume")
	}
	headless := typed[corev1.Service](t, idx.get(t, "Service", sts.Spec.ServiceName))
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v: members would not find each other before they are ready",
			headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	conf := typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "nats-config")).Data["nats.conf"]
	for i := range int(*sts.Spec.Replicas) {
		if route := fmt.Sprintf("nats://nats-%d.%s:6222", i, headless.Name); !strings.Contains(conf, route) {
			t.Errorf("nats.conf has no route %s", route)
		}
	}
	if !strings.Contains(conf, "jetstream") {
		t.Error("nats.conf does not enable JetStream")
	}
	pdb := typed[policyv1.PodDisruptionBudget](t, idx.get(t, "PodDisruptionBudget", "nats"))
	if !selects(t, pdb.Spec.Selector, sts.Spec.Template.Labels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Error("the NATS PodDisruptionBudget must keep a quorum: select the members, maxUnavailable 1")
	}
	if !ingressAllowed(t, idx, sts.Spec.Template.Labels, sts.Spec.Template.Labels, 6222) {
		t.Error("no NetworkPolicy lets the members route to each other on 6222")
	}
	gateway := typed[appsv1.Deployment](t, idx.get(t, "Deployment", "gateway")).Spec.Template.Labels
	if ingressAllowed(t, idx, sts.Spec.Template.Labels, gateway, 4222) {
		t.Error("the gateway may reach NATS: only the daemons should")
	}
	checkNATSAuth(t, idx, sts, conf)
	checkNATSTLS(t, idx, sts, conf)
}

// checkNATSAuth: every NATS member loads the auth.conf of the Secret nats-auth beside its
// nats.conf, and the two together are a configuration nats-server accepts with every
// identity of pkg/natsauth; the bootstrap Job lays out the streams and buckets as bootstrap,
// with as many replicas as the daemons expect, from a pod that may reach NATS.
func checkNATSAuth(t *testing.T, idx objectIndex, sts *appsv1.StatefulSet, conf string) {
	if !strings.Contains(conf, "include auth.conf") {
		t.Fatal("nats.conf does not include auth.conf: NATS would accept anyone")
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if !mountsProjectedSecretKey(sts.Spec.Template.Spec, c, "/etc/nats/auth.conf", "nats-auth", "auth.conf") {
		t.Error("the NATS members do not mount the Secret nats-auth's auth.conf beside nats.conf (/etc/nats)")
	}
	opts, creds, _ := loadNATSConf(t, conf)
	if len(opts.Nkeys) != len(creds.ServerNkeys()) {
		t.Errorf("nats.conf with auth.conf accepts %d identities, want %d", len(opts.Nkeys), len(creds.ServerNkeys()))
	}

	job := typed[batchv1.Job](t, idx.get(t, "Job", "nats-bootstrap"))
	pod := job.Spec.Template
	jc := pod.Spec.Containers[0]
	args := strings.Join(jc.Args, " ")
	replicas := typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "hostplane-config")).Data["HOSTPLANE_NATS_REPLICAS"]
	if !strings.HasPrefix(args, "credentials bootstrap ") || !strings.Contains(args, "--replicas "+replicas) {
		t.Errorf("the bootstrap Job runs %q, want credentials bootstrap --replicas %s (HOSTPLANE_NATS_REPLICAS)", args, replicas)
	}
	credsDir := ""
	if i := slices.Index(jc.Args, "--dir"); i >= 0 && i+1 < len(jc.Args) {
		credsDir = jc.Args[i+1]
	}
	if !mountsSecretKey(pod.Spec, jc, credsDir+"/"+natsauth.Bootstrap+natsauth.SeedExt, "nats-creds-bootstrap", "nkey") {
		t.Errorf("the bootstrap Job does not find the Secret nats-creds-bootstrap's seed at %s/bootstrap.nk", credsDir)
	}
	if !ingressAllowed(t, idx, sts.Spec.Template.Labels, pod.Labels, 4222) {
		t.Error("no NetworkPolicy lets the bootstrap Job reach NATS on 4222")
	}
	if i := slices.Index(jc.Args, "--nats-url"); i < 0 || i+1 >= len(jc.Args) || !strings.HasPrefix(jc.Args[i+1], "tls://") {
		t.Errorf("the bootstrap Job runs %q, want --nats-url tls://…", args)
	}
	if f := envValue(jc, "HOSTPLANE_NATS_CA_FILE"); !mountsSecretKey(pod.Spec, jc, f, "nats-creds-bootstrap", natsauth.TLSCAFile) {
		t.Errorf("the bootstrap Job's HOSTPLANE_NATS_CA_FILE=%q is not the key %s of the Secret nats-creds-bootstrap", f, natsauth.TLSCAFile)
	}
}

// hexKey matches a 32-byte (or longer) key written in hex, as a seal key file holds it.
var hexKey = regexp.MustCompile(`(?i)(^|[^0-9a-f:])[0-9a-f]{64}([^0-9a-f]|$)`)

// checkNoKeyMaterial: no rendered object carries a private key, a seal key or one of the
// Secrets hostplane credentials k8s-secrets makes (the seal key, the management TLS).
func checkNoKeyMaterial(t *testing.T, idx objectIndex) {
	for _, o := range idx.objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s %s carries a private key", o.GetKind(), o.GetName())
		}
		if hexKey.Match(b) {
			t.Errorf("%s %s carries a hex key (a seal key belongs in the Secret hostplane-seal-key from k8s-secrets)", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "Secret" {
			data, _, _ := unstructured.NestedMap(o.Object, "data")
			sdata, _, _ := unstructured.NestedMap(o.Object, "stringData")
			if _, ok := data["pki.key"]; ok || sdata["pki.key"] != nil || o.GetName() == "hostplane-seal-key" || strings.HasPrefix(o.GetName(), "mgmt-tls-") {
				t.Errorf("the manifests carry the Secret %s with key material: it comes from hostplane credentials k8s-secrets", o.GetName())
			}
		}
	}
}

// natsTLSFile matches the files nats.conf names in its tls blocks.
var natsTLSFile = regexp.MustCompile(`(?m)^\s*(?:cert_file|key_file|ca_file):\s*(\S+)\s*$`)

// checkNATSTLS: nats.conf requires TLS of clients and of the cluster routes (mutual, with the
// NATS CA), with files every member mounts from the Secret nats-tls; nats-server accepts the
// configuration with the files `hostplane credentials init --tls-host … --tls-route-host …`
// makes, and the route certificate names every route of nats.conf. No manifest carries a
// private key or a NATS Secret: they come from hostplane credentials k8s-secrets.
func checkNATSTLS(t *testing.T, idx objectIndex, sts *appsv1.StatefulSet, conf string) {
	c := sts.Spec.Template.Spec.Containers[0]
	files := natsTLSFile.FindAllStringSubmatch(conf, -1)
	if len(files) == 0 {
		t.Fatal("nats.conf names no TLS files: NATS would accept plain text")
	}
	for _, m := range files {
		if !mountsSecretKey(sts.Spec.Template.Spec, c, m[1], "nats-tls", filepath.Base(m[1])) {
			t.Errorf("nats.conf reads %s, which is not the key %s of the Secret nats-tls mounted in the NATS members", m[1], filepath.Base(m[1]))
		}
	}

	opts, _, route := loadNATSConf(t, conf)
	if opts.TLSConfig == nil {
		t.Error("nats.conf does not require TLS of clients")
	}
	if opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert || opts.Cluster.TLSConfig.RootCAs == nil {
		t.Fatal("nats.conf does not require mutual TLS, verified by the NATS CA, on the cluster routes")
	}
	crt, err := os.ReadFile(filepath.Join(route.Dir, natsauth.TLSRouteCertFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range opts.Routes {
		if err := leaf.VerifyHostname(r.Hostname()); err != nil {
			t.Errorf("a route certificate for *.nats-headless does not serve the route %s: %v", r, err)
		}
	}

	for _, o := range idx.objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s %s carries a private key", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "Secret" && strings.HasPrefix(o.GetName(), "nats-") {
			t.Errorf("the manifests carry the Secret %s: it comes from hostplane credentials k8s-secrets", o.GetName())
		}
	}
}

// loadNATSConf parses conf in nats-server's own reader as member nats-0 would, beside a
// generated auth.conf and with the TLS files `hostplane credentials init --tls-host nats
// --tls-route-host '*.nats-headless'` makes in place of the mounted ones (each also for
// localhost, so members on this machine can use them). The configuration is written to
// natsConfPath(tlsFiles).
func loadNATSConf(t *testing.T, conf string) (*server.Options, *natsauth.Credentials, *natsauth.TLSFiles) {
	t.Helper()
	dir := t.TempDir()
	creds, err := natsauth.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	tlsFiles, err := natsauth.GenerateTLS(filepath.Join(dir, "tls"), "nats", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.GenerateRouteTLS(tlsFiles.Dir, "*.nats-headless", "localhost"); err != nil {
		t.Fatal(err)
	}
	for _, m := range natsTLSFile.FindAllStringSubmatch(conf, -1) {
		conf = strings.ReplaceAll(conf, m[1], filepath.Join(tlsFiles.Dir, filepath.Base(m[1])))
	}
	if err := os.WriteFile(natsConfPath(tlsFiles), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return parseNATSConf(t, tlsFiles, "nats-0"), creds, tlsFiles
}

// natsConfPath is where loadNATSConf wrote nats.conf.
func natsConfPath(f *natsauth.TLSFiles) string {
	return filepath.Join(filepath.Dir(f.Dir), "nats.conf")
}

// parseNATSConf reads loadNATSConf's nats.conf as the member pod would.
func parseNATSConf(t *testing.T, f *natsauth.TLSFiles, pod string) *server.Options {
	t.Helper()
	t.Setenv("POD_NAME", pod)
	opts, err := server.ProcessConfigFile(natsConfPath(f))
	if err != nil {
		t.Fatalf("nats-server rejects nats.conf with a generated auth.conf and TLS files: %v", err)
	}
	return opts
}

// TestManifestsNATS_ShippedConfigFormsATLSClusterTheBootstrapJobLaysOut runs three
// nats-servers from deploy/k8s's own nats.conf (with generated auth.conf and TLS files, on
// this machine: loopback ports, a store dir each, the members dialled as localhost instead
// of nats-<n>.nats-headless): they route to each other over mutual TLS, `credentials
// bootstrap`'s layout (natsauth.LayOut, as the Job runs it) creates every stream and bucket
// with HOSTPLANE_NATS_REPLICAS copies over TLS, a daemon's identity writes its bucket through
// one member and reads it through another, and a plain-text client or route is refused.
func TestManifestsNATS_ShippedConfigFormsATLSClusterTheBootstrapJobLaysOut(t *testing.T) {
	idx := indexObjects(renderManifests(t, "base"))
	conf := typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "nats-config")).Data["nats.conf"]
	replicas, err := strconv.Atoi(typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "hostplane-config")).Data["HOSTPLANE_NATS_REPLICAS"])
	if err != nil {
		t.Fatal(err)
	}
	_, creds, tlsFiles := loadNATSConf(t, conf)
	// Route ports chosen now, so that every member dials all three as nats.conf's routes do
	// (by name: localhost for nats-<n>.nats-headless).
	var ports []int
	var routes []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		routes = append(routes, fmt.Sprintf("nats://localhost:%d", ports[len(ports)-1]))
		ln.Close()
	}
	var members []*server.Server
	for i := range 3 {
		o := parseNATSConf(t, tlsFiles, fmt.Sprintf("nats-%d", i))
		if len(o.Routes) != len(routes) {
			t.Fatalf("nats.conf has %d routes, want one per member", len(o.Routes))
		}
		o.Host, o.Port, o.HTTPPort = "127.0.0.1", -1, 0
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", ports[i]
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		o.StoreDir, o.NoSigs, o.NoLog = t.TempDir(), true, true
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Shutdown)
		members = append(members, s)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, s := range members {
			if s.NumRoutes() < 2 || !s.JetStreamIsCurrent() {
				return false
			}
		}
		return slices.ContainsFunc(members, (*server.Server).JetStreamIsLeader)
	}, "the three members never routed to each other and elected a JetStream meta leader")
	url := func(s *server.Server) string { return fmt.Sprintf("tls://localhost:%d", s.Addr().(*net.TCPAddr).Port) }
	clientTLS := natsauth.TLS{CAFile: tlsFiles.CAFile()}

	ctx, cancel := context.WithTimeout(ctx(t), 2*time.Minute)
	defer cancel()
	if err := natsauth.LayOut(ctx, url(members[0]), creds.SeedFile(natsauth.Bootstrap), clientTLS, replicas, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the bootstrap Job's layout on the TLS cluster: %v", err)
	}
	asClusterd := func(s *server.Server) jetstream.JetStream {
		opts, err := natsauth.ClientOptions("clusterd", creds.SeedFile("clusterd"), clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		_, js := testenv.Connect(t, url(s), opts...)
		return js
	}
	kv := func(s *server.Server) jetstream.KeyValue {
		b, err := asClusterd(s).KeyValue(ctx, bus.BucketClusters)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := kv(members[1]).Put(ctx, "demo", []byte(`{"v":1}`)); err != nil {
		t.Fatalf("clusterd writes its bucket over TLS: %v", err)
	}
	// Another member's copy catches up (a direct get may be answered by any replica).
	other := kv(members[2])
	var lastErr error
	testenv.Eventually(t, 30*time.Second, func() bool {
		got, err := other.Get(ctx, "demo")
		lastErr = err
		return err == nil && string(got.Value()) == `{"v":1}`
	}, "clusterd never read its write through another member: %v", &lastErr)
	if st, err := asClusterd(members[2]).Stream(ctx, "KV_"+bus.BucketClusters); err != nil || st.CachedInfo().Config.Replicas != replicas {
		t.Errorf("bucket %s: stream %v (%v), want %d replicas", bus.BucketClusters, st, err, replicas)
	}
	testenv.RequirePlainTextRefused(t, fmt.Sprintf("nats://127.0.0.1:%d", members[0].Addr().(*net.TCPAddr).Port))
	testenv.RequirePlainTextRouteRefused(t, members[0].ClusterAddr().String())
}

// checkManagementKubeconfig loads the kubeconfig the daemons mount the way they do
// (kube.RESTConfig), with the ServiceAccount files a pod would have.
func checkManagementKubeconfig(t *testing.T, idx objectIndex) {
	kc := typed[corev1.ConfigMap](t, idx.generated(t, "ConfigMap", "management-kubeconfig")).Data["kubeconfig"]
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount/"
	dir := t.TempDir()
	for _, f := range []string{"token", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := kube.RESTConfig([]byte(strings.ReplaceAll(kc, saDir, dir+"/")))
	if err != nil {
		t.Fatalf("the daemons cannot load the management kubeconfig: %v", err)
	}
	if cfg.Host != "https://kubernetes.default.svc" || cfg.BearerTokenFile != filepath.Join(dir, "token") || cfg.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("management kubeconfig: host %q, token file %q, CA %q; want the in-cluster Service and the pod's ServiceAccount token and CA",
			cfg.Host, cfg.BearerTokenFile, cfg.CAFile)
	}
	for d := range daemonPorts {
		pod := typed[appsv1.Deployment](t, idx.get(t, "Deployment", d)).Spec.Template.Spec
		path := envValue(pod.Containers[0], "HOSTPLANE_MANAGEMENT_KUBECONFIG")
		if path == "" {
			continue
		}
		mounted := false
		for _, m := range pod.Containers[0].VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "management-kubeconfig") &&
					path == filepath.Join(m.MountPath, "kubeconfig") {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("%s: HOSTPLANE_MANAGEMENT_KUBECONFIG=%s is not the mounted management-kubeconfig", d, path)
		}
	}
}
