package componentd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// workloads is a runtime: how a cluster's components run. The reconciler does the rest the
// same way for every runtime: it reads the cluster, waits for its infra and PKI, and removes
// the component records once remove reports the workloads gone; each runtime records its
// components' state with Daemon.record.
type workloads interface {
	// converge moves the cluster's components toward what cl asks for and records their
	// state. It returns ErrStopped once the daemon stopped.
	converge(ctx context.Context, log *slog.Logger, cl *clusterState) (reconcile.Result, error)
	// remove removes the cluster's workloads and reports whether they are gone. It does not
	// wait: the reconciler calls it again until they are.
	remove(ctx context.Context, log *slog.Logger, cluster string) (gone bool, err error)
}

// clusterState is what the reconciler read of a cluster whose infra and PKI are ready.
type clusterState struct {
	cluster *api.Cluster
	infra   *api.Infra
	pki     *api.ClusterPKI
	// Revisions of the cluster and pki records: the workloads depend on nothing else.
	clusterRev, pkiRev uint64
}

// policy is the cluster's availability policy (default api.SingleReplica).
func (cl *clusterState) policy() string {
	if p := cl.cluster.Spec.ControllerAvailabilityPolicy; p != "" {
		return p
	}
	return api.SingleReplica
}

// reconcile converges one cluster (key = cluster name).
func (d *Daemon) reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	d.halt.RLock()
	defer d.halt.RUnlock()
	if d.halted.Load() {
		return reconcile.Result{}, nil
	}
	res, err := d.reconcileCluster(ctx, d.Logger().With("cluster", name), name)
	if errors.Is(err, ErrStopped) {
		return reconcile.Result{}, nil // shutting down; the next componentd carries on
	}
	return res, err
}

func (d *Daemon) reconcileCluster(ctx context.Context, log *slog.Logger, name string) (reconcile.Result, error) {
	c, crev, err := d.clusters.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return d.remove(ctx, log, name)
	case err != nil:
		return reconcile.Result{}, err
	case c.DeletionTimestamp != nil:
		// Node pools go first: nodepoold drains and deletes their machines through this
		// control plane, so it keeps running (and is started again after a restart that
		// stopped it) until they are gone; clusterd waits for them too.
		pools, err := d.nodePools.Keys(ctx, api.ClusterPartsFilter(name))
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(pools) == 0 {
			return d.remove(ctx, log, name)
		}
		log.Debug("deleting: the control plane stays up until the node pools are gone", "nodepools", len(pools))
		res, err := d.keepUp(ctx, log, c, crev)
		if err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > 2*time.Second) {
			res.RequeueAfter = 2 * time.Second // look for the pools' end
		}
		return res, err
	}
	if c.Spec.Hibernating() {
		if h, ok := d.workloads.(hibernator); ok {
			return h.hibernate(ctx, log, c)
		}
	}
	return d.keepUp(ctx, log, c, crev)
}

// hibernator is a runtime that can hibernate a cluster: stop every workload of its control
// plane and keep everything it needs to start them again (data, certificates, ports).
type hibernator interface {
	hibernate(ctx context.Context, log *slog.Logger, c *api.Cluster) (reconcile.Result, error)
}

// keepUp converges the cluster's control plane once its infrastructure and certificates are
// ready.
func (d *Daemon) keepUp(ctx context.Context, log *slog.Logger, c *api.Cluster, crev uint64) (reconcile.Result, error) {
	name := c.Name
	inf, _, err := getOptional(ctx, d.infra, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	pki, pkiRev, err := getOptional(ctx, d.pki, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if inf == nil || !inf.Ready || pki == nil || !pki.Ready {
		log.Debug("waiting for infra and pki to be ready", "infra", inf != nil && inf.Ready, "pki", pki != nil && pki.Ready)
		// Components that already run stay as they are; look again later in case an
		// event was missed.
		if keys, err := d.components.Keys(ctx, api.ClusterPartsFilter(name)); err == nil && len(keys) > 0 {
			return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, nil
		}
		return reconcile.Result{}, nil
	}
	res, err := d.workloads.converge(ctx, log, &clusterState{cluster: c, infra: inf, pki: pki, clusterRev: crev, pkiRev: pkiRev})
	if err != nil {
		return res, err
	}
	if after := d.ensureAddons(ctx, log, c, inf); after > 0 && (res.RequeueAfter == 0 || after < res.RequeueAfter) {
		res.RequeueAfter = after
	}
	return res, nil
}

// remove removes a deleting (or vanished) cluster's workloads and, once they are gone, its
// records.
func (d *Daemon) remove(ctx context.Context, log *slog.Logger, cluster string) (reconcile.Result, error) {
	gone, err := d.workloads.remove(ctx, log, cluster)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !gone {
		return reconcile.Result{RequeueAfter: d.cfg.ProgressInterval}, nil
	}
	d.forgetAddons(cluster)
	// The cluster's backups stay (a new cluster may restore from them); those not taken
	// yet never will be, and an in-place restore has nothing left to restore.
	if err := d.failPending(ctx, cluster, "the cluster was deleted before the snapshot was taken"); err != nil {
		return reconcile.Result{}, err
	}
	if err := d.restores.Delete(ctx, restoreKey(cluster), 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, d.forget(ctx, log, cluster)
}

func getOptional[T any](ctx context.Context, s *store.Store[T], key string) (*T, uint64, error) {
	v, rev, err := s.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	return v, rev, err
}

// records returns the cluster's component records by component name.
func (d *Daemon) records(ctx context.Context, cluster string) (map[string]*store.Entry[api.ControlPlaneComponent], error) {
	prev, err := d.components.List(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*store.Entry[api.ControlPlaneComponent], len(prev))
	for i := range prev {
		byName[prev[i].Value.Name] = &prev[i]
	}
	return byName, nil
}

// requeue is when to look at a cluster again: soon while it is not settled.
func (d *Daemon) requeue(settled bool) reconcile.Result {
	if settled {
		return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}
	}
	return reconcile.Result{RequeueAfter: d.cfg.ProgressInterval}
}
