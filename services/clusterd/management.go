package clusterd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
)

// Cluster API names clusterd writes in the management cluster (docs/nodepool-flow.md).
const (
	// LabelClusterName is Cluster API's cluster label.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// KindHostedControlPlane is the Cluster's controlPlaneRef kind (group
	// api.ControlPlaneGroup); on the local platform its infrastructureRef is an
	// api.KindLocalCluster (written by infrad).
	KindHostedControlPlane = "HostedControlPlane"
	// KubeconfigSecretType is the type of the Secret Cluster API reads the kubeconfig from.
	KubeconfigSecretType = "cluster.x-k8s.io/secret"
	// KubeconfigSecretKey is the key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "value"
	// AnnotationPKISerial on the kubeconfig Secret is the PKI serial its kubeconfig comes from.
	AnnotationPKISerial = "hostplane.dev/pki-serial"
)

// Resources of the management cluster clusterd writes.
var (
	ClusterResource            = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	HostedControlPlaneResource = schema.GroupVersionResource{Group: api.ControlPlaneGroup, Version: api.ControlPlaneVersion, Resource: "hostedcontrolplanes"}
)

// reapplyAfter is how long an unchanged set of objects is trusted before it is applied
// again (repairing changes made behind clusterd's back).
const reapplyAfter = 5 * time.Minute

// management writes the Cluster API side of every cluster into the management cluster:
// the namespace, the kubeconfig Secret, the HostedControlPlane and the Cluster.
type management struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface

	mu      sync.Mutex
	applied map[string]appliedState // by cluster
}

type appliedState struct {
	hash string
	at   time.Time
}

// newManagement connects to the management cluster of kubeconfig file path.
func newManagement(path string) (*management, *rest.Config, error) {
	kc, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read the management kubeconfig: %w", err)
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		return nil, nil, fmt.Errorf("management kubeconfig %s: %w", path, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return &management{cs: cs, dyn: dyn, applied: map[string]appliedState{}}, cfg, nil
}

// capiInputs is everything the management objects of one cluster are rendered from.
type capiInputs struct {
	cluster *api.Cluster // with the status computeStatus just wrote
	infra   *api.Infra   // nil until infrad allocated
	// apiServer is componentd's kube-apiserver record (nil until it exists).
	apiServer *api.ControlPlaneComponent
	// kubeconfig is the admin kubeconfig of PKI serial (nil until pkid issued it).
	kubeconfig []byte
	serial     string
}

// endpoint is the control-plane endpoint once infrad has allocated it.
func (in capiInputs) endpoint() map[string]any {
	if in.infra == nil || !in.infra.Ready || in.infra.Endpoint.Host == "" {
		return nil
	}
	return map[string]any{"host": in.infra.Endpoint.Host, "port": int64(in.infra.Endpoint.Port)}
}

// labels are the labels of every management object of cluster.
func labels(cluster string) map[string]string {
	return map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster, LabelClusterName: cluster}
}

func newObject(gvr schema.GroupVersionResource, kind, cluster string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(api.ControlPlaneNamespace(cluster))
	u.SetName(cluster)
	u.SetLabels(labels(cluster))
	return u
}

// renderHostedControlPlane returns the HostedControlPlane's spec object and status object.
func renderHostedControlPlane(in capiInputs) (spec, status *unstructured.Unstructured) {
	c := in.cluster
	spec = newObject(HostedControlPlaneResource, KindHostedControlPlane, c.Name)
	s := map[string]any{"version": "v" + c.Spec.Release.Version}
	if ep := in.endpoint(); ep != nil {
		s["controlPlaneEndpoint"] = ep
	}
	if in.apiServer != nil {
		s["replicas"] = int64(in.apiServer.Spec.Replicas)
	}
	spec.Object["spec"] = s

	status = newObject(HostedControlPlaneResource, KindHostedControlPlane, c.Name)
	status.SetLabels(nil)
	st := map[string]any{"externalManagedControlPlane": true}
	if controlPlaneInitialized(c) {
		st["initialization"] = map[string]any{"controlPlaneInitialized": true}
	}
	if v := completedVersion(c); v != "" {
		st["version"] = "v" + v
	}
	if a := in.apiServer; a != nil {
		upToDate := 0
		for _, r := range a.Status.Replicas {
			if r.ConfigHash == a.Spec.ConfigHash {
				upToDate++
			}
		}
		st["replicas"] = int64(len(a.Status.Replicas))
		st["readyReplicas"] = int64(a.Status.ReadyReplicas)
		st["availableReplicas"] = int64(a.Status.ReadyReplicas)
		st["upToDateReplicas"] = int64(upToDate)
	}
	if cond, ok := c.Status.Conditions.Get(api.ConditionAvailable); ok {
		msg := cond.Message
		if cond.Status == api.ConditionTrue {
			// Cluster API's convention: a condition in its healthy state says nothing, else
			// the message reaches the Cluster's Available summary (clusterctl describe cluster).
			msg = ""
		}
		st["conditions"] = []any{map[string]any{
			"type":               api.ConditionAvailable,
			"status":             string(cond.Status),
			"reason":             cond.Reason,
			"message":            msg,
			"lastTransitionTime": cond.LastTransitionTime.UTC().Format(time.RFC3339),
		}}
	}
	status.Object["status"] = st
	return spec, status
}

// controlPlaneInitialized: kube-apiserver is available, or every component has run the
// cluster's release once (initialization is for good; a later rollout does not undo it).
func controlPlaneInitialized(c *api.Cluster) bool {
	return c.Status.Conditions.IsTrue(api.ConditionKubeAPIServerAvailable) || completedVersion(c) != ""
}

// completedVersion is the newest release every component has finished rolling out.
func completedVersion(c *api.Cluster) string {
	if c.Status.Version == nil {
		return ""
	}
	for _, h := range c.Status.Version.History {
		if h.State == UpdateCompleted {
			return h.Version
		}
	}
	return ""
}

// renderCluster returns the Cluster API Cluster.
func renderCluster(in capiInputs) *unstructured.Unstructured {
	c := in.cluster
	u := newObject(ClusterResource, "Cluster", c.Name)
	pods := cmpOr(c.Spec.Networking.PodCIDR, api.DefaultPodCIDR)
	services := cmpOr(c.Spec.Networking.ServiceCIDR, api.DefaultServiceCIDR)
	spec := map[string]any{
		"controlPlaneRef": map[string]any{"apiGroup": api.ControlPlaneGroup, "kind": KindHostedControlPlane, "name": c.Name},
		"clusterNetwork": map[string]any{
			"pods":     map[string]any{"cidrBlocks": []any{pods}},
			"services": map[string]any{"cidrBlocks": []any{services}},
		},
	}
	if c.Spec.Platform.Type == api.PlatformLocal {
		spec["infrastructureRef"] = map[string]any{"apiGroup": api.InfrastructureGroup, "kind": api.KindLocalCluster, "name": c.Name}
	}
	if ep := in.endpoint(); ep != nil {
		spec["controlPlaneEndpoint"] = ep
	}
	u.Object["spec"] = spec
	return u
}

func cmpOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// kubeconfigSecret is the Secret Cluster API reaches the guest cluster with.
func kubeconfigSecret(in capiInputs) *corev1ac.SecretApplyConfiguration {
	name := in.cluster.Name
	return corev1ac.Secret(api.KubeconfigSecretName(name), api.ControlPlaneNamespace(name)).
		WithLabels(labels(name)).
		WithAnnotations(map[string]string{AnnotationPKISerial: in.serial}).
		WithType(KubeconfigSecretType).
		WithData(map[string][]byte{KubeconfigSecretKey: in.kubeconfig})
}

// apply converges the management objects of a live cluster. It skips the API calls when
// nothing changed since the last apply less than reapplyAfter ago.
func (m *management) apply(ctx context.Context, in capiInputs) error {
	name := in.cluster.Name
	hcpSpec, hcpStatus := renderHostedControlPlane(in)
	cl := renderCluster(in)
	hash, err := hashOf(hcpSpec.Object, hcpStatus.Object, cl.Object, in.serial, in.kubeconfig)
	if err != nil {
		return err
	}
	m.mu.Lock()
	last := m.applied[name]
	m.mu.Unlock()
	if last.hash == hash && time.Since(last.at) < reapplyAfter {
		return nil
	}

	if err := m.applyNamespace(ctx, name); err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: Name, Force: true}
	if in.kubeconfig != nil {
		if _, err := m.cs.CoreV1().Secrets(api.ControlPlaneNamespace(name)).Apply(ctx, kubeconfigSecret(in), opts); err != nil {
			return fmt.Errorf("apply Secret %s: %w", api.KubeconfigSecretName(name), err)
		}
	}
	hcp := m.dyn.Resource(HostedControlPlaneResource).Namespace(api.ControlPlaneNamespace(name))
	if _, err := hcp.Apply(ctx, name, hcpSpec, opts); err != nil {
		return fmt.Errorf("apply HostedControlPlane %s: %w", name, err)
	}
	if _, err := hcp.ApplyStatus(ctx, name, hcpStatus, opts); err != nil {
		return fmt.Errorf("apply the status of HostedControlPlane %s: %w", name, err)
	}
	if _, err := m.dyn.Resource(ClusterResource).Namespace(api.ControlPlaneNamespace(name)).Apply(ctx, name, cl, opts); err != nil {
		return fmt.Errorf("apply Cluster %s (are Cluster API's CRDs installed? nodepoold installs them): %w", name, err)
	}
	m.mu.Lock()
	m.applied[name] = appliedState{hash: hash, at: time.Now()}
	m.mu.Unlock()
	return nil
}

// applyNamespace applies the cluster's namespace. componentd's kubernetes runtime and infrad
// write it too: a label another writer owns is left to it (no forced apply).
func (m *management) applyNamespace(ctx context.Context, cluster string) error {
	ns := api.ControlPlaneNamespace(cluster)
	obj, err := m.cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(ns).WithLabels(labels(cluster)),
		metav1.ApplyOptions{FieldManager: Name})
	if apierrors.IsConflict(err) {
		obj, err = m.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("apply namespace %s: %w", ns, err)
	}
	if obj.DeletionTimestamp != nil {
		return fmt.Errorf("%w: %s", ErrNamespaceTerminating, ns)
	}
	return nil
}

// teardown deletes the cluster's Cluster API objects: the Cluster first (Cluster API deletes
// what hangs off it), then, once it is gone, the HostedControlPlane and the kubeconfig
// Secret. It returns what it still waits for, "" once everything is gone.
func (m *management) teardown(ctx context.Context, cluster string) (string, error) {
	ns := api.ControlPlaneNamespace(cluster)
	m.forget(cluster)
	clusters := m.dyn.Resource(ClusterResource).Namespace(ns)
	cl, err := clusters.Get(ctx, cluster, metav1.GetOptions{})
	switch {
	case err == nil:
		if cl.GetDeletionTimestamp() == nil {
			if err := clusters.Delete(ctx, cluster, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("delete Cluster %s/%s: %w", ns, cluster, err)
			}
		}
		msg := fmt.Sprintf("waiting for Cluster API to delete the Cluster %s/%s", ns, cluster)
		if f := cl.GetFinalizers(); len(f) > 0 {
			msg += " (finalizers " + strings.Join(f, ", ") + ")"
		}
		return msg, nil
	case !apierrors.IsNotFound(err): // the CRD missing is NotFound too: nothing to delete
		return "", fmt.Errorf("read Cluster %s/%s: %w", ns, cluster, err)
	}
	hcps := m.dyn.Resource(HostedControlPlaneResource).Namespace(ns)
	if err := hcps.Delete(ctx, cluster, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete HostedControlPlane %s/%s: %w", ns, cluster, err)
	}
	secret := api.KubeconfigSecretName(cluster)
	if err := m.cs.CoreV1().Secrets(ns).Delete(ctx, secret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete Secret %s/%s: %w", ns, secret, err)
	}
	if _, err := hcps.Get(ctx, cluster, metav1.GetOptions{}); err == nil {
		return fmt.Sprintf("waiting for the HostedControlPlane %s/%s to be deleted", ns, cluster), nil
	} else if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("read HostedControlPlane %s/%s: %w", ns, cluster, err)
	}
	return "", nil
}

// deleteNamespace deletes the cluster's namespace once nothing of the cluster is left; it
// does not wait for the management cluster's namespace controller to empty it.
func (m *management) deleteNamespace(ctx context.Context, cluster string) error {
	ns := api.ControlPlaneNamespace(cluster)
	err := m.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}

func (m *management) forget(cluster string) {
	m.mu.Lock()
	delete(m.applied, cluster)
	m.mu.Unlock()
}

// hashOf is a digest of vs' JSON.
func hashOf(vs ...any) (string, error) {
	h := sha256.New()
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
