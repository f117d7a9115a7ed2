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
	for _, st := range sts.Items {
		if st.Spec.Replicas == nil || *st.Spec.Replicas != 0 {
			_, err = r.cs.AppsV1().StatefulSets(ns).Patch(ctx, st.Name, types.MergePatchType, zeroReplicas, opts)
			if err != nil && !apierrors.IsNotFound(err) {
				return HibernateProgress{}, fmt.Errorf("scale statefulset %s/%s to 0: %w", ns, st.Name, err)
			}
		}
	}
	for _, d := range deps.Items {
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			_, err = r.cs.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, zeroReplicas, opts)
			if err != nil && !apierrors.IsNotFound(err) {
				return HibernateProgress{}, fmt.Errorf("scale deployment %s/%s to 0: %w", ns, d.Name, err)
			}
		}
	}
	pods, err := r.cs.CoreV1().Pods(ns).List(ctx, ownedBy(cluster)) // the pod templates carry the owner labels
	if err != nil {
		return HibernateProgress{}, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	return HibernateProgress{Stopped: len(pods.Items) == 0, Pods: len(pods.Items)}, nil
}
