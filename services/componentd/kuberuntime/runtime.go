package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
)

// Runtime applies, observes and deletes control planes in a management cluster.
type Runtime struct {
	cs kubernetes.Interface
}

// New returns a Runtime writing through restConfig (a management cluster identity that may
// manage namespaces, Secrets, Services, ServiceAccounts, RoleBindings, Deployments,
// StatefulSets and PodDisruptionBudgets, and may bind the ClusterRole KarpenterClusterRole).
func New(restConfig *rest.Config) (*Runtime, error) {
	if restConfig == nil {
		return nil, errors.New("kuberuntime: no rest config")
	}
	cfg := rest.CopyConfig(restConfig)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		// client-go's default (5 QPS, burst 10) makes one Apply of ~25 objects take seconds.
		cfg.QPS, cfg.Burst = 50, 100
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kuberuntime: new clientset: %w", err)
	}
	return &Runtime{cs: cs}, nil
}

// NewForClientset returns a Runtime writing through cs.
func NewForClientset(cs kubernetes.Interface) *Runtime { return &Runtime{cs: cs} }

var applyOpts = metav1.ApplyOptions{FieldManager: FieldManager, Force: true}

// Apply renders in and applies the result with server-side apply: it creates the namespace,
// converges every object, and deletes the objects of the cluster it manages that are no
// longer rendered (the PodDisruptionBudgets when a cluster is not HighlyAvailable, the
// autoscaler's objects once it is disabled). Applying
// the same inputs twice changes nothing. When in.EtcdImage is empty, a running etcd keeps its
// image (see the package documentation). It returns the objects it applied, so the caller
// knows each component's config hash.
func (r *Runtime) Apply(ctx context.Context, in Inputs) (*Objects, error) {
	ns := Namespace(in.Cluster)
	if in.EtcdImage == "" && in.Cluster != "" {
		sts, err := r.cs.AppsV1().StatefulSets(ns).Get(ctx, api.ComponentEtcd, metav1.GetOptions{})
		switch {
		case err == nil:
			in.EtcdImage = containerImage(sts.Spec.Template.Spec, api.ComponentEtcd)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("read the etcd StatefulSet: %w", err)
		}
	}
	o, err := Render(in)
	if err != nil {
		return nil, err
	}

	nsObj, err := r.cs.CoreV1().Namespaces().Apply(ctx, o.Namespace, applyOpts)
	if err != nil {
		return nil, fmt.Errorf("apply namespace %s: %w", ns, err)
	}
	if nsObj.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: %s", ErrNamespaceTerminating, ns)
	}
	applied := sets.New[string]()
	if err := applyEach(ctx, "secret", ns, o.Secrets, r.cs.CoreV1().Secrets(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "service", ns, o.Services, r.cs.CoreV1().Services(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "serviceaccount", ns, o.ServiceAccounts, r.cs.CoreV1().ServiceAccounts(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "rolebinding", ns, o.RoleBindings, r.cs.RbacV1().RoleBindings(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "statefulset", ns, o.StatefulSets, r.cs.AppsV1().StatefulSets(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "deployment", ns, o.Deployments, r.cs.AppsV1().Deployments(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := applyEach(ctx, "poddisruptionbudget", ns, o.PodDisruptionBudgets, r.cs.PolicyV1().PodDisruptionBudgets(ns).Apply, applied); err != nil {
		return nil, err
	}
	if err := r.deleteManaged(ctx, in.Cluster, "prune", applied); err != nil {
		return nil, err
	}
	return o, nil
}

// wrapTerminating turns the apiserver's "namespace is being terminated" into
// ErrNamespaceTerminating.
func wrapTerminating(err error, ns string) error {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return fmt.Errorf("%w: %s: %w", ErrNamespaceTerminating, ns, err)
	}
	return err
}

// applyEach applies items, objects of kind in namespace ns, with server-side apply, and adds
// "<kind>/<name>" of each to applied.
func applyEach[AC interface{ GetName() *string }, O any](ctx context.Context, kind, ns string, items []AC,
	apply func(context.Context, AC, metav1.ApplyOptions) (O, error), applied sets.Set[string]) error {
	for _, it := range items {
		if _, err := apply(ctx, it, applyOpts); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", kind, ns, *it.GetName(), wrapTerminating(err, ns))
		}
		applied.Insert(kind + "/" + *it.GetName())
	}
	return nil
}

// kind is one kind of object this package manages: its name in errors and its typed client.
type kind struct {
	name   string
	list   func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error)
	delete func(ctx context.Context, ns, name string, o metav1.DeleteOptions) error
}

// typedClient is the part of a namespaced typed client (client-go's XxxInterface) that prune
// and Delete use.
type typedClient[L runtime.Object] interface {
	List(ctx context.Context, o metav1.ListOptions) (L, error)
	Delete(ctx context.Context, name string, o metav1.DeleteOptions) error
}

func kindOf[L runtime.Object, C typedClient[L]](name string, client func(ns string) C) kind {
	return kind{name,
		func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client(ns).List(ctx, o)
		},
		func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return client(ns).Delete(ctx, n, o)
		}}
}

// kinds are the kinds of object this package manages in a cluster's namespace.
func (r *Runtime) kinds() []kind {
	return []kind{
		kindOf("poddisruptionbudget", r.cs.PolicyV1().PodDisruptionBudgets),
		kindOf("deployment", r.cs.AppsV1().Deployments),
		kindOf("statefulset", r.cs.AppsV1().StatefulSets),
		kindOf("service", r.cs.CoreV1().Services),
		kindOf("rolebinding", r.cs.RbacV1().RoleBindings),
		kindOf("serviceaccount", r.cs.CoreV1().ServiceAccounts),
		kindOf("secret", r.cs.CoreV1().Secrets),
	}
}

// ownedBy selects the objects this package manages for cluster.
func ownedBy(cluster string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: k8slabels.SelectorFromSet(k8slabels.Set{
		LabelManagedBy: ManagedBy, LabelCluster: cluster,
	}).String()}
}

// deleteManaged deletes the cluster's managed objects that keep does not hold as
// "<kind>/<name>" (background propagation, so the workloads' pods follow through the garbage
// collector); verb names the step in its errors.
func (r *Runtime) deleteManaged(ctx context.Context, cluster, verb string, keep sets.Set[string]) error {
	ns := Namespace(cluster)
	bg := metav1.DeletePropagationBackground
	for _, k := range r.kinds() {
		l, err := k.list(ctx, ns, ownedBy(cluster))
		if err != nil {
			return fmt.Errorf("list %ss in %s: %w", k.name, ns, err)
		}
		err = meta.EachListItem(l, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil || keep.Has(k.name+"/"+m.GetName()) {
				return err
			}
			err = k.delete(ctx, ns, m.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s %s/%s: %w", verb, k.name, ns, m.GetName(), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteProgress says how far the deletion of a cluster's control plane is.
type DeleteProgress struct {
	// Gone is true once the namespace no longer exists.
	Gone bool
	// Message says what the deletion waits for while it is not Gone.
	Message string
}

// Delete deletes cluster's control plane: every object it manages (background propagation,
// so the workloads' pods follow through the garbage collector), then the namespace. It does
// not wait: call it again until Gone. The namespace itself disappears once the management
// cluster's namespace controller (in kube-controller-manager) has emptied it and removed the
// "kubernetes" finalizer; until then Message says so.
func (r *Runtime) Delete(ctx context.Context, cluster string) (DeleteProgress, error) {
	ns := Namespace(cluster)
	obj, err := r.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return DeleteProgress{Gone: true}, nil
	}
	if err != nil {
		return DeleteProgress{}, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	if obj.DeletionTimestamp == nil {
		if err := r.deleteManaged(ctx, cluster, "delete", nil); err != nil {
			return DeleteProgress{}, err
		}
		bg := metav1.DeletePropagationBackground
		err := r.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
		if apierrors.IsNotFound(err) {
			return DeleteProgress{Gone: true}, nil
		}
		if err != nil {
			return DeleteProgress{}, fmt.Errorf("delete namespace %s: %w", ns, err)
		}
		if obj, err = r.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return DeleteProgress{Gone: true}, nil
		} else if err != nil {
			return DeleteProgress{}, fmt.Errorf("read namespace %s: %w", ns, err)
		}
	}
	return DeleteProgress{Message: terminatingMessage(obj)}, nil
}

// terminatingMessage says what a terminating namespace waits for.
func terminatingMessage(ns *corev1.Namespace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %s is terminating", ns.Name)
	if ns.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " since %s", ns.DeletionTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
	}
	var problems []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue && c.Message != "" {
			problems = append(problems, c.Message)
		}
	}
	switch {
	case len(problems) > 0:
		fmt.Fprintf(&b, ": %s", strings.Join(problems, "; "))
	case len(ns.Spec.Finalizers) > 0:
		fins := make([]string, len(ns.Spec.Finalizers))
		for i, f := range ns.Spec.Finalizers {
			fins[i] = string(f)
		}
		fmt.Fprintf(&b, "; waiting for the namespace controller to empty it and remove the finalizers %s",
			strings.Join(fins, ", "))
	}
	return b.String()
}

func containerImage(spec corev1.PodSpec, name string) string {
	for _, c := range spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
