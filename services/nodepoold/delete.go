package nodepoold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// ReasonDeleting is the Ready condition's reason while a pool is deleted.
const ReasonDeleting = "Deleting"

// requestDeletion marks a pool deleted (once) and publishes nodepool.deleting; the
// reconciler does the rest. why is logged and shown in the Ready condition.
func (d *Daemon) requestDeletion(ctx context.Context, cluster, pool, why string) (*api.NodePool, error) {
	now := time.Now().UTC().Truncate(time.Second)
	requested := false
	var sent outbox.Entry
	np, _, err := d.pools.MutateBefore(ctx, api.NodePoolKey(cluster, pool), false, func(np *api.NodePool) error {
		requested = false
		if np.DeletionTimestamp != nil {
			return store.ErrNoChange
		}
		np.DeletionTimestamp = &now
		np.Status.Conditions.Set(api.Condition{
			Type: api.NodePoolConditionReady, Status: api.ConditionFalse, Reason: ReasonDeleting,
			Message: "deletion requested: " + why, ObservedGeneration: np.Generation,
		}, now)
		requested = true
		return nil
	}, func(ctx context.Context, _ *api.NodePool) (err error) {
		sent, err = d.record(ctx, cluster, pool, VerbDeleting)
		return err
	})
	if err != nil {
		return nil, err
	}
	if requested {
		d.poolLog(cluster, pool).InfoContext(ctx, "node pool deletion requested", "why", why)
		d.outbox.Send(ctx, sent)
		d.controller.EnqueueContext(ctx, api.NodePoolKey(cluster, pool))
	}
	return np, nil
}

// reconcileDeletion takes a deleting pool's objects down in order: the MachineHealthCheck
// (no repairs while machines go) and the MachineDeployment or MachineSet (Cluster API drains
// and deletes the machines and their Nodes), then, once no Machine of the pool remains, the
// template and the userdata Secrets; then the key goes and nodepool.deleted is published.
// clusterGoing says the pool goes because its cluster does: its machines are not drained
// (see skipDrain).
func (d *Daemon) reconcileDeletion(ctx context.Context, np *api.NodePool, clusterGoing bool) (reconcile.Result, error) {
	key := api.NodePoolKey(np.Cluster, np.Name)
	if d.mgmt != nil {
		if err := d.mgmt.ready(); err != nil {
			return reconcile.Result{RequeueAfter: d.cfg.ProgressRequeue}, nil
		}
		mctx, done := d.mgmt.bind(ctx)
		waiting, err := d.deleteObjects(mctx, np, clusterGoing)
		done()
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting != "" {
			d.writeDeletingStatus(ctx, key, waiting)
			return reconcile.Result{RequeueAfter: d.cfg.ProgressRequeue}, nil
		}
	}
	sent, err := d.record(ctx, np.Cluster, np.Name, VerbDeleted)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.pools.Delete(ctx, key, 0); err != nil {
		return reconcile.Result{}, fmt.Errorf("delete %s: %w", key, err)
	}
	d.metrics.forget(key)
	d.outbox.Send(ctx, sent)
	d.poolLog(np.Cluster, np.Name).InfoContext(ctx, "node pool deleted",
		"deletion_seconds", time.Since(*np.DeletionTimestamp).Round(time.Second).Seconds())
	return reconcile.Result{}, nil
}

// deleteObjects deletes what nodepoold wrote for the pool and returns what it still waits
// for ("" once everything is gone).
func (d *Daemon) deleteObjects(ctx context.Context, np *api.NodePool, clusterGoing bool) (string, error) {
	c := d.mgmt.client()
	ns := api.ControlPlaneNamespace(np.Cluster)
	if clusterGoing {
		// Before the machines start going, so that no drain begins.
		if err := d.skipDrain(ctx, np); err != nil {
			return "", err
		}
	}
	key := metav1.ObjectMeta{Namespace: ns, Name: np.Name}
	for _, obj := range []client.Object{&clusterv1.MachineHealthCheck{ObjectMeta: key}, &clusterv1.MachineDeployment{ObjectMeta: key}, &clusterv1.MachineSet{ObjectMeta: key}} {
		if err := deleteObject(ctx, c, obj); err != nil {
			return "", err
		}
	}
	machines, err := listMachines(ctx, d.mgmt.reader(), np.Cluster, np.Name)
	if err != nil {
		return "", err
	}
	if len(machines) > 0 {
		// Machines no MachineSet owns (those Karpenter launched for the autonode pool; Cluster
		// API makes the Cluster their owner) go one by one: Cluster API drains each and deletes
		// its machine and Node.
		for i := range machines {
			m := &machines[i]
			if !ownedByMachineSet(m) && m.DeletionTimestamp.IsZero() {
				if err := c.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
					return "", fmt.Errorf("delete Machine %s: %w", m.Name, err)
				}
			}
		}
		msg := fmt.Sprintf("waiting for %d machines to go: %s", len(machines), machineList(machines))
		if clusterGoing {
			msg += "; not drained: the cluster is being deleted"
		}
		return msg, nil
	}
	// The MachineDeployment or MachineSet keeps its finalizer until its machines are gone.
	for kind, obj := range map[string]client.Object{"MachineDeployment": &clusterv1.MachineDeployment{}, "MachineSet": &clusterv1.MachineSet{}} {
		err := d.mgmt.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: np.Name}, obj)
		if err == nil {
			return fmt.Sprintf("waiting for Cluster API to remove %s %s", kind, np.Name), nil
		}
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get %s %s: %w", kind, np.Name, err)
		}
	}
	if err := deleteObject(ctx, c, &infrav1.LocalMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: np.Name}}); err != nil {
		return "", err
	}
	secrets, err := d.userDataSecrets(ctx, np, true)
	if err != nil {
		return "", err
	}
	for i := range secrets {
		if err := deleteObject(ctx, c, &secrets[i]); err != nil {
			return "", err
		}
	}
	return "", nil
}

// skipDrain marks every Machine of the pool so that Cluster API deletes it without draining
// its Node or waiting for its volumes to detach: the pool goes because its cluster does, so
// the guest's workloads go too and there is nowhere to evict them to, a PodDisruptionBudget
// would hold the deletion for ever, and the guest control plane they would be evicted through
// is itself going away. Cluster API does the same for the machines of a Cluster it deletes;
// here the Cluster goes last, so nodepoold says it.
func (d *Daemon) skipDrain(ctx context.Context, np *api.NodePool) error {
	machines, err := listMachines(ctx, d.mgmt.reader(), np.Cluster, np.Name)
	if err != nil {
		return err
	}
	for i := range machines {
		m := &machines[i]
		_, noDrain := m.Annotations[clusterv1.ExcludeNodeDrainingAnnotation]
		_, noDetach := m.Annotations[clusterv1.ExcludeWaitForNodeVolumeDetachAnnotation]
		if noDrain && noDetach {
			continue
		}
		if err := annotateMachine(ctx, d.mgmt.client(), m, map[string]any{
			clusterv1.ExcludeNodeDrainingAnnotation:            "cluster-deleting",
			clusterv1.ExcludeWaitForNodeVolumeDetachAnnotation: "cluster-deleting",
		}); err != nil {
			return err
		}
		d.poolLog(np.Cluster, np.Name).InfoContext(ctx, "machine goes without a drain: the cluster is being deleted", "machine", m.Name)
	}
	return nil
}

// ownedByMachineSet says whether a MachineSet owns m (it deletes m when it goes).
func ownedByMachineSet(m *clusterv1.Machine) bool {
	return slices.ContainsFunc(m.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "MachineSet" })
}

// machineList names up to five machines with their phases and, for one Cluster API is
// deleting, what its deletion waits for (its Deleting condition: a drain, volumes, the
// infrastructure, the Node).
func machineList(ms []clusterv1.Machine) string {
	var names []string
	for _, m := range ms {
		s := m.Name + " (" + m.Status.Phase
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineDeletingCondition); c != nil &&
			c.Status == metav1.ConditionTrue && c.Message != "" {
			s += ": " + oneLine(c.Message)
		}
		names = append(names, s+")")
	}
	slices.Sort(names)
	return listFirst(names, 5)
}

// writeDeletingStatus shows what a deletion waits for.
func (d *Daemon) writeDeletingStatus(ctx context.Context, key, waiting string) {
	now := time.Now().UTC().Truncate(time.Second)
	_, _, err := d.pools.Mutate(ctx, key, false, func(np *api.NodePool) error {
		np.Status.Conditions.Set(api.Condition{
			Type: api.NodePoolConditionReady, Status: api.ConditionFalse, Reason: ReasonDeleting,
			Message: waiting, ObservedGeneration: np.Generation,
		}, now)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.Logger().WarnContext(ctx, "write deleting status", "key", key, "err", err)
	}
}

// userDataSecrets lists the pool's userdata Secrets: latest reads the apiserver (a pool's
// deletion must not miss one); otherwise the manager's cache answers (they carry Cluster API's
// cluster-name label), for the sweep that runs on every reconcile and deletes what it missed
// the next time.
func (d *Daemon) userDataSecrets(ctx context.Context, np *api.NodePool, latest bool) ([]corev1.Secret, error) {
	var list corev1.SecretList
	r := d.mgmt.cache()
	if latest {
		r = d.mgmt.reader()
	}
	err := r.List(ctx, &list, client.InNamespace(api.ControlPlaneNamespace(np.Cluster)),
		client.MatchingLabels{api.LabelOwner: Name, api.LabelCluster: np.Cluster, api.LabelNodePool: np.Name})
	if err != nil {
		return nil, fmt.Errorf("list userdata Secrets: %w", err)
	}
	return list.Items, nil
}

// deleteUnusedUserData deletes the pool's userdata Secrets of older hashes once nothing
// refers to them: not the template, no Machine (its bootstrap data, or the config an InPlace
// update hands it).
func (d *Daemon) deleteUnusedUserData(ctx context.Context, s *scope) {
	if s.state == nil {
		return
	}
	used := map[string]bool{api.UserDataSecretName(s.np.Name, s.hash): true}
	if s.template != nil {
		used[s.template.DataSecret] = true
	}
	if t := s.state.appliedTemplate(); t != nil {
		used[t.DataSecret] = true
	}
	for _, m := range s.state.machines {
		if m.Spec.Bootstrap.DataSecretName != nil {
			used[*m.Spec.Bootstrap.DataSecretName] = true
		}
		if u := m.Annotations[api.AnnotationDesiredUserData]; u != "" {
			used[u] = true
		}
	}
	secrets, err := d.userDataSecrets(ctx, s.np, false)
	if err != nil {
		s.fail("list userdata Secrets", err)
		return
	}
	for i, sec := range secrets {
		if used[sec.Name] {
			continue
		}
		if err := deleteObject(ctx, d.mgmt.client(), &secrets[i]); err != nil {
			s.fail("delete userdata Secret "+sec.Name, err)
			continue
		}
		s.log.InfoContext(ctx, "userdata Secret of an old config deleted", "secret", sec.Name)
	}
}
