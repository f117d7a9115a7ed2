package clusterd

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/services/clusterd/controlplane"
)

// Names clusterd puts on the objects it writes in the management cluster
// (docs/nodepool-flow.md).
const (
	// KubeconfigSecretType is the type of the Secret Cluster API reads the kubeconfig from.
	KubeconfigSecretType = "cluster.x-k8s.io/secret"
	// KubeconfigSecretKey is the key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "value"
	// AnnotationPKISerial on the kubeconfig Secret is the PKI serial its kubeconfig comes from.
	AnnotationPKISerial = "hostplane.dev/pki-serial"
)

// reapplyAfter is how long an unchanged set of objects is trusted before it is applied
// again (repairing changes made behind clusterd's back).
const reapplyAfter = 5 * time.Minute

// management writes the Cluster API side of every cluster into the management cluster:
// the namespace, the kubeconfig Secret, the HostedControlPlane and the Cluster, all with
// server-side apply as field manager clusterd, through one controller-runtime client.
type management struct {
	client client.Client

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
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplane.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("management client: %w", err)
	}
	return &management{client: c, applied: map[string]appliedState{}}, cfg, nil
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

// endpoint is the control-plane endpoint once infrad has allocated it (zero until then).
func (in capiInputs) endpoint() clusterv1.APIEndpoint {
	if in.infra == nil || !in.infra.Ready || in.infra.Endpoint.Host == "" {
		return clusterv1.APIEndpoint{}
	}
	return clusterv1.APIEndpoint{Host: in.infra.Endpoint.Host, Port: int32(in.infra.Endpoint.Port)}
}

// labels are the labels of every management object of cluster.
func labels(cluster string) map[string]string {
	return map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster, clusterv1.ClusterNameLabel: cluster}
}

// objectMeta names cluster's object in its control-plane namespace, with labels (nil: none).
func objectMeta(cluster string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: api.ControlPlaneNamespace(cluster), Name: cluster, Labels: labels}
}

// renderHostedControlPlane returns the HostedControlPlane's spec object and status object.
func renderHostedControlPlane(in capiInputs) (spec, status *controlplane.HostedControlPlane) {
	c := in.cluster
	kind := metav1.TypeMeta{APIVersion: controlplane.GroupVersion.String(), Kind: controlplane.KindHostedControlPlane}
	spec = &controlplane.HostedControlPlane{TypeMeta: kind, ObjectMeta: objectMeta(c.Name, labels(c.Name)),
		Spec: controlplane.HostedControlPlaneSpec{Version: "v" + c.Spec.Release.Version, ControlPlaneEndpoint: in.endpoint()}}
	if in.apiServer != nil {
		spec.Spec.Replicas = ptr.To(int32(in.apiServer.Spec.Replicas))
	}

	status = &controlplane.HostedControlPlane{TypeMeta: kind, ObjectMeta: objectMeta(c.Name, nil)}
	st := &status.Status
	st.ExternalManagedControlPlane = ptr.To(true)
	if controlPlaneInitialized(c) {
		st.Initialization.ControlPlaneInitialized = ptr.To(true)
	}
	if v := completedVersion(c); v != "" {
		st.Version = "v" + v
	}
	if a := in.apiServer; a != nil {
		var upToDate int32
		for _, r := range a.Status.Replicas {
			if r.ConfigHash == a.Spec.ConfigHash {
				upToDate++
			}
		}
		st.Replicas = ptr.To(int32(len(a.Status.Replicas)))
		st.ReadyReplicas = ptr.To(int32(a.Status.ReadyReplicas))
		st.AvailableReplicas = ptr.To(int32(a.Status.ReadyReplicas))
		st.UpToDateReplicas = ptr.To(upToDate)
	}
	if cond, ok := c.Status.Conditions.Get(api.ConditionAvailable); ok {
		msg := cond.Message
		if cond.Status == api.ConditionTrue {
			// Cluster API's convention: a condition in its healthy state says nothing, else
			// the message reaches the Cluster's Available summary (clusterctl describe cluster).
			msg = ""
		}
		st.Conditions = []metav1.Condition{{
			Type:               api.ConditionAvailable,
			Status:             metav1.ConditionStatus(cond.Status),
			Reason:             cond.Reason,
			Message:            msg,
			LastTransitionTime: metav1.NewTime(cond.LastTransitionTime),
		}}
	}
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
func renderCluster(in capiInputs) *clusterv1.Cluster {
	c := in.cluster
	cl := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: clusterv1.ClusterKind},
		ObjectMeta: objectMeta(c.Name, labels(c.Name)),
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: api.ControlPlaneGroup, Kind: controlplane.KindHostedControlPlane, Name: c.Name,
			},
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{cmp.Or(c.Spec.Networking.PodCIDR, api.DefaultPodCIDR)}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{cmp.Or(c.Spec.Networking.ServiceCIDR, api.DefaultServiceCIDR)}},
			},
			ControlPlaneEndpoint: in.endpoint(),
		},
	}
	if api.ProvidesMachines(c.Spec.Platform.Type) {
		cl.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: api.InfrastructureGroup, Kind: api.KindLocalCluster, Name: c.Name,
		}
	}
	return cl
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
	hash, err := hashOf(hcpSpec, hcpStatus, cl, in.serial, in.kubeconfig)
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
	if in.kubeconfig != nil {
		if err := m.client.Apply(ctx, kubeconfigSecret(in), client.FieldOwner(Name), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply Secret %s: %w", api.KubeconfigSecretName(name), err)
		}
	}
	// Cluster API's types and ours have no apply configurations: they go as an apply patch,
	// whose body is their JSON: only the fields renderHostedControlPlane and renderCluster set.
	if err := m.client.Patch(ctx, hcpSpec, client.Apply, client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply HostedControlPlane %s: %w", name, err)
	}
	if err := m.client.Status().Patch(ctx, hcpStatus, client.Apply, client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply the status of HostedControlPlane %s: %w", name, err)
	}
	if err := m.client.Patch(ctx, cl, client.Apply, client.FieldOwner(Name), client.ForceOwnership); err != nil {
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
	name := api.ControlPlaneNamespace(cluster)
	ns := corev1ac.Namespace(name).WithLabels(labels(cluster))
	err := m.client.Apply(ctx, ns, client.FieldOwner(Name))
	deleting := ns.DeletionTimestamp != nil
	if apierrors.IsConflict(err) {
		var cur corev1.Namespace
		err = m.client.Get(ctx, client.ObjectKey{Name: name}, &cur)
		deleting = cur.DeletionTimestamp != nil
	}
	if err != nil {
		return fmt.Errorf("apply namespace %s: %w", name, err)
	}
	if deleting {
		return fmt.Errorf("%w: %s", ErrNamespaceTerminating, name)
	}
	return nil
}

// teardown deletes the cluster's Cluster API objects: the Cluster first (Cluster API deletes
// what hangs off it), then, once it is gone, the HostedControlPlane and the kubeconfig
// Secret. It returns what it still waits for, "" once everything is gone.
func (m *management) teardown(ctx context.Context, cluster string) (string, error) {
	ns := api.ControlPlaneNamespace(cluster)
	m.forget(cluster)
	var cl clusterv1.Cluster
	err := m.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, &cl)
	switch {
	case err == nil:
		if cl.DeletionTimestamp == nil {
			if err := m.client.Delete(ctx, &cl); err != nil && !kube.IsNotFound(err) {
				return "", fmt.Errorf("delete Cluster %s/%s: %w", ns, cluster, err)
			}
		}
		msg := fmt.Sprintf("waiting for Cluster API to delete the Cluster %s/%s", ns, cluster)
		if f := cl.Finalizers; len(f) > 0 {
			msg += " (finalizers " + strings.Join(f, ", ") + ")"
		}
		return msg, nil
	case !kube.IsNotFound(err): // no Cluster CRD: nothing to delete
		return "", fmt.Errorf("read Cluster %s/%s: %w", ns, cluster, err)
	}
	hcp := &controlplane.HostedControlPlane{ObjectMeta: objectMeta(cluster, nil)}
	if err := m.client.Delete(ctx, hcp); err != nil && !kube.IsNotFound(err) {
		return "", fmt.Errorf("delete HostedControlPlane %s/%s: %w", ns, cluster, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: api.KubeconfigSecretName(cluster)}}
	if err := m.client.Delete(ctx, secret); err != nil && !kube.IsNotFound(err) {
		return "", fmt.Errorf("delete Secret %s/%s: %w", ns, secret.Name, err)
	}
	if err := m.client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp); err == nil {
		return fmt.Sprintf("waiting for the HostedControlPlane %s/%s to be deleted", ns, cluster), nil
	} else if !kube.IsNotFound(err) {
		return "", fmt.Errorf("read HostedControlPlane %s/%s: %w", ns, cluster, err)
	}
	return "", nil
}

// deleteNamespace deletes the cluster's namespace once nothing of the cluster is left; it
// does not wait for the management cluster's namespace controller to empty it.
func (m *management) deleteNamespace(ctx context.Context, cluster string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: api.ControlPlaneNamespace(cluster)}}
	if err := m.client.Delete(ctx, ns); err != nil && !kube.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
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
