package kuberuntime

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostplane/hostplane/pkg/api"
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
// until Stopped. Apply wakes the cluster: it sets every workload's replicas again, those of
// Inputs.Held (HeldOnWake) once kube-apiserver is Available. A cluster that has no namespace
// (never applied) is Stopped.
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

// wakeDependents are the components HeldOnWake holds, in its order: they need
// kube-apiserver and start only once it serves.
var wakeDependents = []string{api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}

// HeldOnWake returns, from the workloads' status (Runtime.Status), the components a waking
// cluster's Apply must keep at 0 replicas for now (Inputs.Held): kube-controller-manager,
// kube-scheduler and the autoscaler, each while its workload exists with 0 replicas and
// kube-apiserver's is absent or not Available. So a cluster woken from Hibernate (every
// workload there at 0) starts etcd and kube-apiserver alone, and the rest once
// kube-apiserver is Available: started together on a loaded host they slow kube-apiserver's
// start past client-go's 10 s TLS handshake timeout, and the first request of a user waking
// the cluster fails. The rule reads only what the management cluster holds, so it holds the
// same way after a componentd restart mid-wake. Otherwise nothing is held:
//   - at create no workload exists yet, and every component starts at once (faster: each
//     waits for its dependencies by itself);
//   - a dependent that runs (replicas > 0) is never scaled down, so kube-apiserver turning
//     unready (a lost management node) does not stop the kube-controller-manager.
func HeldOnWake(status map[string]ComponentStatus) []string {
	if s, ok := status[api.ComponentKubeAPIServer]; ok && s.Available {
		return nil
	}
	var held []string
	for _, c := range wakeDependents {
		if s, ok := status[c]; ok && s.Replicas == 0 {
			held = append(held, c)
		}
	}
	return held
}
