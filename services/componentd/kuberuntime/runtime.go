package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
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
	for _, s := range o.Secrets {
		if _, err := r.cs.CoreV1().Secrets(ns).Apply(ctx, s, applyOpts); err != nil {
			return nil, fmt.Errorf("apply secret %s/%s: %w", ns, *s.Name, wrapTerminating(err, ns))
		}
	}
	for _, s := range o.Services {
		if _, err := r.cs.CoreV1().Services(ns).Apply(ctx, s, applyOpts); err != nil {
			return nil, fmt.Errorf("apply service %s/%s: %w", ns, *s.Name, wrapTerminating(err, ns))
		}
	}
	for _, s := range o.ServiceAccounts {
		if _, err := r.cs.CoreV1().ServiceAccounts(ns).Apply(ctx, s, applyOpts); err != nil {
			return nil, fmt.Errorf("apply serviceaccount %s/%s: %w", ns, *s.Name, wrapTerminating(err, ns))
		}
	}
	for _, b := range o.RoleBindings {
		if _, err := r.cs.RbacV1().RoleBindings(ns).Apply(ctx, b, applyOpts); err != nil {
			return nil, fmt.Errorf("apply rolebinding %s/%s: %w", ns, *b.Name, wrapTerminating(err, ns))
		}
	}
	for _, s := range o.StatefulSets {
		if _, err := r.cs.AppsV1().StatefulSets(ns).Apply(ctx, s, applyOpts); err != nil {
			return nil, fmt.Errorf("apply statefulset %s/%s: %w", ns, *s.Name, wrapTerminating(err, ns))
		}
	}
	for _, d := range o.Deployments {
		if _, err := r.cs.AppsV1().Deployments(ns).Apply(ctx, d, applyOpts); err != nil {
			return nil, fmt.Errorf("apply deployment %s/%s: %w", ns, *d.Name, wrapTerminating(err, ns))
		}
	}
	for _, p := range o.PodDisruptionBudgets {
		if _, err := r.cs.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, p, applyOpts); err != nil {
			return nil, fmt.Errorf("apply poddisruptionbudget %s/%s: %w", ns, *p.Name, wrapTerminating(err, ns))
		}
	}
	if err := r.prune(ctx, in.Cluster, o); err != nil {
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

// kind is one kind of object this package manages, with how to list and delete it.
type kind struct {
	name   string
	list   func(ctx context.Context, ns string, opts metav1.ListOptions) ([]string, error)
	delete func(ctx context.Context, ns, name string) error
}

func (r *Runtime) kinds() []kind {
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	names := func(n int, name func(i int) string) []string {
		out := make([]string, n)
		for i := range n {
			out[i] = name(i)
		}
		return out
	}
	return []kind{
		{"poddisruptionbudget", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, name, del)
		}},
		{"deployment", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.AppsV1().Deployments(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.AppsV1().Deployments(ns).Delete(ctx, name, del)
		}},
		{"statefulset", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.AppsV1().StatefulSets(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.AppsV1().StatefulSets(ns).Delete(ctx, name, del)
		}},
		{"service", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.CoreV1().Services(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.CoreV1().Services(ns).Delete(ctx, name, del)
		}},
		{"rolebinding", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.RbacV1().RoleBindings(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.RbacV1().RoleBindings(ns).Delete(ctx, name, del)
		}},
		{"serviceaccount", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.CoreV1().ServiceAccounts(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.CoreV1().ServiceAccounts(ns).Delete(ctx, name, del)
		}},
		{"secret", func(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
			l, err := r.cs.CoreV1().Secrets(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			return names(len(l.Items), func(i int) string { return l.Items[i].Name }), nil
		}, func(ctx context.Context, ns, name string) error {
			return r.cs.CoreV1().Secrets(ns).Delete(ctx, name, del)
		}},
	}
}

// ownedBy selects the objects this package manages for cluster.
func ownedBy(cluster string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: k8slabels.SelectorFromSet(k8slabels.Set{
		LabelManagedBy: ManagedBy, LabelCluster: cluster,
	}).String()}
}

// prune deletes the cluster's managed objects that o does not hold.
func (r *Runtime) prune(ctx context.Context, cluster string, o *Objects) error {
	keep := map[string][]string{}
	for _, s := range o.Secrets {
		keep["secret"] = append(keep["secret"], *s.Name)
	}
	for _, s := range o.Services {
		keep["service"] = append(keep["service"], *s.Name)
	}
	for _, s := range o.StatefulSets {
		keep["statefulset"] = append(keep["statefulset"], *s.Name)
	}
	for _, d := range o.Deployments {
		keep["deployment"] = append(keep["deployment"], *d.Name)
	}
	for _, p := range o.PodDisruptionBudgets {
		keep["poddisruptionbudget"] = append(keep["poddisruptionbudget"], *p.Name)
	}
	for _, s := range o.ServiceAccounts {
		keep["serviceaccount"] = append(keep["serviceaccount"], *s.Name)
	}
	for _, b := range o.RoleBindings {
		keep["rolebinding"] = append(keep["rolebinding"], *b.Name)
	}
	ns := Namespace(cluster)
	for _, k := range r.kinds() {
		names, err := k.list(ctx, ns, ownedBy(cluster))
		if err != nil {
			return fmt.Errorf("list %ss in %s: %w", k.name, ns, err)
		}
		for _, n := range names {
			if slices.Contains(keep[k.name], n) {
				continue
			}
			if err := k.delete(ctx, ns, n); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("prune %s %s/%s: %w", k.name, ns, n, err)
			}
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
		for _, k := range r.kinds() {
			names, err := k.list(ctx, ns, ownedBy(cluster))
			if err != nil {
				return DeleteProgress{}, fmt.Errorf("list %ss in %s: %w", k.name, ns, err)
			}
			for _, n := range names {
				if err := k.delete(ctx, ns, n); err != nil && !apierrors.IsNotFound(err) {
					return DeleteProgress{}, fmt.Errorf("delete %s %s/%s: %w", k.name, ns, n, err)
				}
			}
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
