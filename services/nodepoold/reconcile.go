package nodepoold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// scope is one reconcile of one pool: what was read, what was done, what went wrong. The
// status is computed from it in one place (status.go) after the work.
type scope struct {
	np      *api.NodePool
	cluster *api.Cluster // nil when the cluster record is gone
	hash    string
	now     time.Time
	log     *slog.Logger
	// retry: a write met a newer version of its object (the autoscaler scaled the pool); the
	// pool is looked at again soon.
	retry bool

	// ignition is ignitiond's token record of the pool (nil: none yet); userDataReady says
	// its userdata serves the pool's current hash.
	ignition      *api.IgnitionTokens
	userDataReady bool
	// template is what the MachineDeployment or MachineSet points at (nil: not written yet);
	// it lags the pool's hash while ignitiond has not minted the new userdata.
	template *machineTemplate

	// management is why the management cluster cannot be used ("" when it can).
	management string
	state      *poolState
	// desired is the number of machines the pool should have now.
	desired int32
	// inPlace is the in-place updater's progress (InPlace pools).
	inPlace inPlaceProgress

	errs []error
}

func (s *scope) fail(step string, err error) {
	s.errs = append(s.errs, fmt.Errorf("%s: %w", step, err))
}

// Reconcile converges the pool named key ("<cluster>.<nodepool>"). A cluster key
// ("<cluster>", from cluster, machine and component events) enqueues every pool of the
// cluster.
func (d *Daemon) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	cluster, _, isPool := api.SplitPartKey(key)
	if !isPool {
		res, err := d.ensureAutoNodePool(ctx, cluster)
		return res, errors.Join(err, d.enqueueClusterPools(ctx, cluster))
	}
	np, _, err := d.pools.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		d.metrics.forget(key)
		return reconcile.Result{}, d.unwatchIdleGuest(ctx, cluster)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	c, _, err := d.clusters.Get(ctx, cluster)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("read cluster %s: %w", cluster, err)
	}
	clusterGoing := c == nil || c.DeletionTimestamp != nil
	if np.DeletionTimestamp == nil && clusterGoing {
		why := "its cluster is being deleted"
		if c == nil {
			why = "its cluster is gone"
		}
		if np, err = d.requestDeletion(ctx, np.Cluster, np.Name, why); err != nil {
			return reconcile.Result{}, err
		}
	}
	if np.DeletionTimestamp != nil {
		return d.reconcileDeletion(ctx, np, clusterGoing)
	}
	return d.reconcilePool(ctx, np, c)
}

// enqueueClusterPools wakes every pool of cluster; with none, its guest Nodes are no longer
// watched.
func (d *Daemon) enqueueClusterPools(ctx context.Context, cluster string) error {
	keys, err := d.pools.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return fmt.Errorf("list pools of %s: %w", cluster, err)
	}
	for _, k := range keys {
		d.controller.EnqueueContext(ctx, k)
	}
	if len(keys) == 0 && d.nodeWatches != nil {
		d.nodeWatches.stop(cluster, "it has no node pool")
	}
	return nil
}

// unwatchIdleGuest stops watching cluster's Nodes once its last pool is gone.
func (d *Daemon) unwatchIdleGuest(ctx context.Context, cluster string) error {
	if d.nodeWatches == nil {
		return nil
	}
	keys, err := d.pools.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return fmt.Errorf("list pools of %s: %w", cluster, err)
	}
	if len(keys) == 0 {
		d.nodeWatches.stop(cluster, "it has no node pool")
	}
	return nil
}

// reconcilePool writes a live pool's objects and reports its status.
func (d *Daemon) reconcilePool(ctx context.Context, np *api.NodePool, c *api.Cluster) (reconcile.Result, error) {
	s := &scope{np: np, cluster: c, hash: np.Status.ConfigHash, now: time.Now().UTC().Truncate(time.Second), log: d.poolLog(np.Cluster, np.Name)}
	if s.hash == "" { // a record written before the hash was stored at the API
		s.hash = ConfigHash(&np.Spec)
	}
	s.desired = np.Spec.DesiredReplicas()
	d.readIgnition(ctx, s)
	switch {
	case d.mgmt == nil:
		s.management = "no management cluster is configured (HOSTPLANE_MANAGEMENT_KUBECONFIG): the pool gets no machines"
	case d.mgmt.ready() != nil:
		s.management = "waiting for the management cluster: " + d.mgmt.ready().Error()
	default:
		mctx, done := d.mgmt.bind(ctx)
		d.converge(mctx, s)
		if cause := context.Cause(mctx); errors.Is(cause, errManagerStopped) {
			s.errs = []error{cause} // what failed failed for that reason: say it once
		}
		done()
	}
	changed, err := d.writeStatus(ctx, s)
	if err != nil {
		s.errs = append(s.errs, err)
	}
	if err := errors.Join(s.errs...); err != nil {
		return reconcile.Result{}, err
	}
	if changed || s.progressing() {
		return reconcile.Result{RequeueAfter: d.cfg.ProgressRequeue}, nil
	}
	return reconcile.Result{RequeueAfter: d.cfg.Requeue}, nil
}

// readIgnition reads ignitiond's token record of the pool.
func (d *Daemon) readIgnition(ctx context.Context, s *scope) {
	tok, _, err := d.ignition.Get(ctx, api.NodePoolKey(s.np.Cluster, s.np.Name))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		s.fail("read the ignition record", err)
	default:
		s.ignition = tok
		s.userDataReady = tok.Ready && tok.Current.ConfigHash == s.hash && len(tok.UserData) > 0
	}
}

// converge writes the pool's management objects, moves InPlace machines and keeps the guest
// Nodes' labels and taints. Each step's failure is recorded and the next steps still run
// when they can.
func (d *Daemon) converge(ctx context.Context, s *scope) {
	st, err := d.observe(ctx, s.np, s.cluster)
	if err != nil {
		s.fail("read the pool's machines", err)
		return
	}
	s.state = st
	o := newObjects(s.np)
	c, cached := d.mgmt.client(), d.mgmt.cache()

	if s.userDataReady {
		if err := d.applied.apply(ctx, c, cached, o.userDataSecret(s.hash, s.ignition.UserData), s.now); err != nil {
			s.fail("write the userdata Secret", err)
			return
		}
		s.template = &machineTemplate{Version: "v" + s.np.Spec.Release.Version, DataSecret: api.UserDataSecretName(s.np.Name, s.hash),
			InstanceType: s.np.Spec.Platform.InstanceType()}
	} else if t := st.appliedTemplate(); t != nil {
		// ignitiond has not minted the new hash's userdata: the machines keep booting the
		// last one (release and userdata move together).
		s.template = t
	}
	if !api.ProvidesMachines(s.np.Spec.Platform.Type) {
		// The user provisions the machines with the userdata Secret; nothing else to write.
		d.syncNodes(ctx, s)
		d.deleteUnusedUserData(ctx, s)
		return
	}
	if s.template != nil {
		if err := d.applied.apply(ctx, c, cached, o.localMachineTemplate(*s.template), s.now); err != nil {
			s.fail("write the LocalMachineTemplate", err)
			return
		}
		s.desired = st.replicasToApply(s.np)
		var obj client.Object
		if s.np.Spec.Management.UpgradeType == api.UpgradeTypeInPlace {
			obj = o.machineSet(*s.template, s.desired)
		} else {
			obj = o.machineDeployment(*s.template, s.desired)
		}
		if s.np.Name == api.AutoNodePoolName {
			// Karpenter sizes it, one Machine per NodeClaim beside the empty deployment.
			s.desired = int32(len(st.liveMachines()))
		}
		if s.np.Spec.AutoScaling != nil {
			// The autoscaler writes the replicas too: apply only over the object as it was
			// read, so that a stale view never undoes a scale it just made (observe read only
			// the kind of the pool's upgrade type).
			switch {
			case st.md != nil:
				obj.SetResourceVersion(st.md.ResourceVersion)
			case st.ms != nil:
				obj.SetResourceVersion(st.ms.ResourceVersion)
			}
		}
		switch err := d.applied.apply(ctx, c, cached, obj, s.now); {
		case apierrors.IsConflict(err):
			s.retry = true // read again and write over the autoscaler's latest size
		case err != nil:
			s.fail("write the "+obj.GetObjectKind().GroupVersionKind().Kind, err)
			return
		}
	}
	if s.np.Spec.Management.AutoRepair {
		if err := d.applied.apply(ctx, c, cached, o.machineHealthCheck(), s.now); err != nil {
			s.fail("write the MachineHealthCheck", err)
		}
	} else if err := deleteCached(ctx, c, &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: s.np.Name}}); err != nil {
		s.fail("delete the MachineHealthCheck", err)
	}
	if s.np.Spec.Management.UpgradeType == api.UpgradeTypeInPlace && s.userDataReady {
		d.updateInPlace(ctx, s)
	}
	if s.np.Name != api.AutoNodePoolName { // Karpenter gives its nodes their NodeClaim's labels and taints
		d.syncNodes(ctx, s)
	}
	d.deleteUnusedUserData(ctx, s)
}

// apply writes obj with server-side apply as nodepoold, taking over conflicting fields. It
// sets obj's apiVersion and kind, which an apply request must carry.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// deleteObject deletes an object nodepoold wrote (only its kind, namespace and name matter);
// a missing one (or kind) is fine.
func deleteObject(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Delete(ctx, obj, client.PropagationPolicy("Background"))
	if err == nil || apierrors.IsNotFound(err) || isNoKind(err) {
		return nil
	}
	gvk, _ := c.GroupVersionKindFor(obj)
	return fmt.Errorf("delete %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
}

// deleteCached deletes obj unless the cache says there is none: a pool without autoRepair
// would otherwise send a DELETE of its absent MachineHealthCheck on every reconcile.
func deleteCached(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		return nil
	}
	return deleteObject(ctx, c, obj)
}

// progressing reports whether the pool is on its way somewhere, so it is looked at again soon.
func (s *scope) progressing() bool {
	if s.management != "" {
		return s.mgmtPending()
	}
	if s.retry || !s.userDataReady || s.template == nil || s.inPlace.active > 0 || s.inPlace.pending > 0 {
		return true
	}
	if s.state == nil {
		return false
	}
	c := s.counts()
	if api.ProvidesMachines(s.np.Spec.Platform.Type) && len(s.state.machines) != int(c.replicas) {
		return true // machines being deleted
	}
	return c.replicas != s.desired || c.ready != c.replicas || c.updated != c.replicas
}

// mgmtPending is true while the management cluster is starting (not when none is configured).
func (s *scope) mgmtPending() bool { return strings.HasPrefix(s.management, "waiting") }

// poolLog is the daemon's logger for one pool.
func (d *Daemon) poolLog(cluster, pool string) *slog.Logger {
	return d.Logger().With("cluster", cluster, "nodepool", pool)
}
