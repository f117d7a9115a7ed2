package kuberuntime

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// HibernateFieldManager is the field manager of Hibernate's scale to 0. It is not
// FieldManager: the next Apply (forced) takes spec.replicas back and sets the rendered count,
// so waking a cluster is an ordinary Apply.
const HibernateFieldManager = FieldManager + "-hibernate"

// zeroReplicas is the merge patch Hibernate sends to every workload.
var zeroReplicas = []byte(`{"spec":{"replicas":0}}`)

// HibernateProgress says how far the hibernation of a cluster's control plane is.
type HibernateProgress struct {
	// Stopped is true once no pod of the control plane is left (none running, none
	// terminating).
	Stopped bool
	// Pods counts the control plane's pods still there.
	Pods int
}

// Hibernate scales every control-plane workload of cluster (etcd's StatefulSet, the
// Deployments of kube-apiserver, kube-controller-manager, kube-scheduler and the autoscaler)
// to 0 replicas and reports whether their pods are gone. Everything else stays: the
// namespace, etcd's PersistentVolumeClaims (its data), the Secrets, Services,
// ServiceAccounts, RoleBindings and PodDisruptionBudgets. It does not wait: call it again
// until Stopped. Apply wakes the cluster: it sets every workload's replicas again. A cluster
// that has no namespace (never applied) is Stopped.
func (r *Runtime) Hibernate(ctx context.Context, cluster string) (HibernateProgress, error) {
	ns := Namespace(cluster)
	opts := metav1.PatchOptions{FieldManager: HibernateFieldManager}
	sts, err := r.cs.AppsV1().StatefulSets(ns).List(ctx, ownedBy(cluster))
	if err != nil {
		return HibernateProgress{}, fmt.Errorf("list statefulsets in %s: %w", ns, err)
	}
	deps, err := r.cs.AppsV1().Deployments(ns).List(ctx, ownedBy(cluster))
	if err != nil {
		return HibernateProgress{}, fmt.Errorf("list deployments in %s: %w", ns, err)
	}
	type workload struct {
		kind, name string
		replicas   *int32
	}
	var all []workload
	for _, s := range sts.Items {
		all = append(all, workload{"statefulset", s.Name, s.Spec.Replicas})
	}
	for _, d := range deps.Items {
		all = append(all, workload{"deployment", d.Name, d.Spec.Replicas})
	}
	for _, w := range all {
		if w.replicas != nil && *w.replicas == 0 {
			continue
		}
		if w.kind == "statefulset" {
			_, err = r.cs.AppsV1().StatefulSets(ns).Patch(ctx, w.name, types.MergePatchType, zeroReplicas, opts)
		} else {
			_, err = r.cs.AppsV1().Deployments(ns).Patch(ctx, w.name, types.MergePatchType, zeroReplicas, opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return HibernateProgress{}, fmt.Errorf("scale %s %s/%s to 0: %w", w.kind, ns, w.name, err)
		}
	}
	pods, err := r.cs.CoreV1().Pods(ns).List(ctx, ownedBy(cluster)) // the pod templates carry the owner labels
	if err != nil {
		return HibernateProgress{}, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	return HibernateProgress{Stopped: len(pods.Items) == 0, Pods: len(pods.Items)}, nil
}
