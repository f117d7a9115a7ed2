package clusterd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Reconcile converges the cluster named key: it aggregates the other daemons' state into the
// cluster's status and, for a deleting cluster, removes it once nothing is left of it.
func (d *Daemon) Reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	c, rev, err := d.clusters.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		d.metrics.forget(key)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	o, err := d.observe(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if c.DeletionTimestamp != nil {
		d.teardownManagement(ctx, key, &o)
		if o.empty() {
			return reconcile.Result{}, d.finishDeletion(ctx, c, rev)
		}
	}

	var scheduleTime *time.Time
	if c.DeletionTimestamp == nil {
		if scheduleTime, err = d.applyHibernationTriggers(ctx, c, o.infra); err != nil {
			return reconcile.Result{}, fmt.Errorf("hibernation of %s: %w", key, err)
		}
	}

	now := time.Now().UTC().Truncate(time.Second)
	var ch statusChange
	var sent outbox.Entry
	updated, _, err := d.clusters.MutateBefore(ctx, key, false, func(c *api.Cluster) error {
		ch = computeStatus(c, o, now)
		if scheduleTime != nil {
			h := api.HibernationStatus{}
			if c.Status.Hibernation != nil {
				h = *c.Status.Hibernation
			}
			t := scheduleTime.Truncate(time.Second)
			h.ScheduleTime = &t
			c.Status.Hibernation = &h
		}
		return nil
	}, func(ctx context.Context, _ *api.Cluster) error {
		if !ch.conditions {
			return nil
		}
		var err error
		sent, err = d.record(ctx, key, VerbStatus)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		d.metrics.forget(key)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("write status of %s: %w", key, err)
	}
	d.metrics.set(key, updated.Status.Conditions)
	if ch.firstAvailable {
		d.metrics.createToAvailable.Observe(now.Sub(updated.CreationTimestamp).Seconds())
	}
	if ch.conditions {
		d.logStatus(ctx, updated)
		d.outbox.Send(ctx, sent)
	}
	if updated.DeletionTimestamp != nil {
		return reconcile.Result{RequeueAfter: d.cfg.DeletingRequeue}, nil
	}
	if !d.syncManagement(ctx, updated, o) {
		return reconcile.Result{RequeueAfter: d.cfg.DeletingRequeue}, nil
	}
	return reconcile.Result{RequeueAfter: d.cfg.Requeue}, nil
}

// syncManagement writes the Cluster API objects of live cluster c; false when that failed
// (logged once per distinct error; the reconcile comes back soon).
func (d *Daemon) syncManagement(ctx context.Context, c *api.Cluster, o observed) bool {
	if d.mgmt == nil {
		return true
	}
	in := capiInputs{cluster: c, infra: o.infra, apiServer: o.components[api.ComponentKubeAPIServer]}
	err := func() error {
		if o.pki != nil && o.pki.Ready {
			clients, err := d.guestClients()
			if err != nil {
				return err
			}
			g, err := clients.For(ctx, c.Name)
			if err != nil && !errors.Is(err, guest.ErrNotReady) {
				return err
			}
			if err == nil {
				in.kubeconfig, in.serial = g.Kubeconfig, g.Serial
			}
		}
		return d.mgmt.apply(ctx, in)
	}()
	d.noteManagementError(ctx, c.Name, err)
	return err == nil
}

// teardownManagement records in o what the deletion of the cluster's Cluster API objects
// waits for. They go only once nodepoold and ignitiond removed every key of the cluster.
func (d *Daemon) teardownManagement(ctx context.Context, name string, o *observed) {
	if d.mgmt == nil || len(o.nodePools) > 0 || len(o.ignitionKeys) > 0 {
		return
	}
	msg, err := d.mgmt.teardown(ctx, name)
	d.noteManagementError(ctx, name, err)
	if err != nil {
		msg = "deleting the Cluster API objects failed, retrying: " + err.Error()
	}
	o.management = msg
}

// noteManagementError logs a management-cluster error of the cluster once (until it
// changes or clears).
func (d *Daemon) noteManagementError(ctx context.Context, cluster string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	d.mgmtErrMu.Lock()
	last := d.mgmtErr[cluster]
	if msg == "" {
		delete(d.mgmtErr, cluster)
	} else {
		d.mgmtErr[cluster] = msg
	}
	d.mgmtErrMu.Unlock()
	switch {
	case msg != "" && msg != last:
		d.clusterLog(cluster).WarnContext(ctx, "write the Cluster API objects", "err", err)
	case msg == "" && last != "":
		d.clusterLog(cluster).InfoContext(ctx, "the Cluster API objects are written again")
	}
}

// observe reads what infrad, pkid, componentd, nodepoold and ignitiond hold for the cluster.
func (d *Daemon) observe(ctx context.Context, name string) (observed, error) {
	o := observed{components: map[string]*api.ControlPlaneComponent{}}
	infra, _, err := d.infra.Get(ctx, name)
	switch {
	case err == nil:
		o.infra = infra
	case !errors.Is(err, store.ErrNotFound):
		return o, fmt.Errorf("read infra: %w", err)
	}
	p, _, err := d.pki.Get(ctx, name)
	switch {
	case err == nil:
		o.pki = p
	case !errors.Is(err, store.ErrNotFound):
		return o, fmt.Errorf("read pki: %w", err)
	}
	pools, err := d.nodepools.List(ctx, api.ClusterPartsFilter(name))
	if err != nil {
		return o, fmt.Errorf("read node pools: %w", err)
	}
	for _, e := range pools {
		o.nodePools = append(o.nodePools, e.Key)
		if cond, ok := e.Value.Status.Conditions.Get(api.NodePoolConditionReady); ok && e.Value.DeletionTimestamp != nil && cond.Message != "" {
			if o.nodePoolWaits == nil {
				o.nodePoolWaits = map[string]string{}
			}
			o.nodePoolWaits[e.Key] = cond.Message
		}
	}
	if o.ignitionKeys, err = d.ignition.Keys(ctx, name, api.ClusterPartsFilter(name)); err != nil {
		return o, fmt.Errorf("read ignition keys: %w", err)
	}
	ign, _, err := d.ignition.Get(ctx, name)
	switch {
	case err == nil:
		o.ignition = ign
	case !errors.Is(err, store.ErrNotFound):
		return o, fmt.Errorf("read the ignition server: %w", err)
	}
	entries, err := d.components.List(ctx, api.ClusterPartsFilter(name))
	if err != nil {
		return o, fmt.Errorf("read components: %w", err)
	}
	for _, e := range entries {
		o.componentKeys = append(o.componentKeys, e.Key)
		o.components[strings.TrimPrefix(e.Key, name+".")] = e.Value
		if cond, ok := e.Value.Status.Conditions.Get(api.ConditionDegraded); ok && cond.Status == api.ConditionTrue && cond.Reason == api.ReasonHibernationNotSupported {
			o.notSupported = cond.Message
		}
	}
	return o, nil
}

// finishDeletion removes a deleting cluster's key once every other daemon has released it.
func (d *Daemon) finishDeletion(ctx context.Context, c *api.Cluster, rev uint64) error {
	if d.mgmt != nil {
		if err := d.mgmt.deleteNamespace(ctx, c.Name); err != nil {
			return err
		}
	}
	d.sealMu.Lock()
	if d.guests != nil {
		d.guests.Forget(c.Name)
	}
	d.sealMu.Unlock()
	sent, err := d.record(ctx, c.Name, VerbDeleted)
	if err != nil {
		return err
	}
	if err := d.clusters.Delete(ctx, c.Name, rev); err != nil {
		return fmt.Errorf("delete cluster %s: %w", c.Name, err)
	}
	d.metrics.forget(c.Name)
	d.outbox.Send(ctx, sent)
	d.clusterLog(c.Name).InfoContext(ctx, "cluster deleted",
		"deletion_seconds", time.Since(*c.DeletionTimestamp).Round(time.Second).Seconds())
	return nil
}

// logStatus logs a condition change with the conditions that matter to a reader.
func (d *Daemon) logStatus(ctx context.Context, c *api.Cluster) {
	attrs := []any{"generation", c.Generation}
	for _, t := range []string{api.ConditionAvailable, api.ConditionProgressing, api.ConditionDegraded, api.ConditionDeleting} {
		if cond, ok := c.Status.Conditions.Get(t); ok {
			attrs = append(attrs, strings.ToLower(t), string(cond.Status)+" "+cond.Reason+": "+cond.Message)
		}
	}
	d.clusterLog(c.Name).InfoContext(ctx, "cluster status changed", attrs...)
}

// clusterLog is the daemon's logger for one cluster.
func (d *Daemon) clusterLog(cluster string) *slog.Logger {
	return d.Logger().With("cluster", cluster)
}
