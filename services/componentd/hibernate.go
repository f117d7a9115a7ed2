package componentd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

var _ hibernator = processRuntime{}

// hibernate stops every process of the cluster's control plane, dependents first, and
// records each component hibernated. The cluster's directory (etcd's data, the certificates
// and kubeconfigs) stays, and so do the ports infrad allocated: waking is an ordinary
// converge that starts the same processes on the same data. A componentd restart while the
// cluster hibernates finds nothing to stop and records nothing new.
func (p processRuntime) hibernate(ctx context.Context, log *slog.Logger, c *api.Cluster) (reconcile.Result, error) {
	d := p.d
	sup, err := d.supervisor()
	if err != nil {
		return reconcile.Result{}, err
	}
	stopped, err := d.stopProcesses(ctx, sup, c.Name)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: hibernate: %w", c.Name, err)
	}
	if stopped > 0 {
		log.Info("hibernating: control-plane processes stopped", "processes", stopped)
	}
	if err := d.recordHibernated(ctx, log, c); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, nil
}

// recordHibernated records every component of c hibernated (no replica, Available False,
// RolloutComplete True, reason Hibernated), whatever the runtime: call it once nothing of
// the control plane runs any more.
func (d *Daemon) recordHibernated(ctx context.Context, log *slog.Logger, c *api.Cluster) error {
	byName, err := d.records(ctx, c.Name)
	if err != nil {
		return err
	}
	for _, comp := range component.All() {
		old := byName[comp.Name]
		if old == nil && comp.Name == api.ComponentKarpenter {
			continue // never ran
		}
		var next api.ControlPlaneComponent
		if old != nil {
			if err := deepCopy(old.Value, &next); err != nil {
				return err
			}
		} else {
			// A cluster created hibernated: nothing ran yet, nothing is missing.
			next = api.ControlPlaneComponent{ObjectMeta: api.ObjectMeta{Name: comp.Name}, Cluster: c.Name,
				Spec:   api.ControlPlaneComponentSpec{Version: c.Spec.Release.Version, DependsOn: comp.DependsOn},
				Status: api.ControlPlaneComponentStatus{Version: c.Spec.Release.Version}}
		}
		now := time.Now().UTC()
		st := &next.Status
		st.ReadyReplicas, st.Replicas = 0, nil
		const msg = "the cluster hibernates: no replica runs"
		for _, t := range []struct {
			typ    string
			status api.ConditionStatus
			reason string
		}{
			{api.ConditionAvailable, api.ConditionFalse, api.ReasonHibernated},
			{api.ConditionRolloutComplete, api.ConditionTrue, api.ReasonHibernated},
			{api.ConditionDegraded, api.ConditionFalse, api.ReasonHibernated},
		} {
			st.Conditions.Set(api.Condition{Type: t.typ, Status: t.status, Reason: t.reason, Message: msg, ObservedGeneration: next.Generation}, now)
		}
		d.metrics.observeReplicas(c.Name, comp.Name, 0, 0, 0)
		d.observeMetrics(c.Name, comp.Name, old, &next, now)
		if err := d.save(ctx, log.With("component", comp.Name), c.Name, old, &next, "hibernated", true); err != nil {
			return fmt.Errorf("%s: %w", comp.Name, err)
		}
	}
	return nil
}
