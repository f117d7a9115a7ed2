package infrad

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/localcloud"
)

// syncMachinePower powers the cluster's machines off while it hibernates, and on again once
// it is awake and its kube-apiserver is available (so they come back as the same Nodes
// without first failing against a stopped control plane). It reports whether the machines
// are as the spec wants: all off, or none off. A crashed machine is not powered on: that is
// autorepair's business.
func (d *Daemon) syncMachinePower(ctx context.Context, c *api.Cluster, log *slog.Logger) (settled bool, err error) {
	p := d.provider
	if p == nil || p.CloudFor(c.Spec.Platform.Type) == nil {
		return true, nil // no machine here to stop
	}
	cloud := p.CloudFor(c.Spec.Platform.Type)
	machines, err := cloud.List(ctx, c.Name)
	if err != nil {
		return false, fmt.Errorf("list the machines of %s: %w", c.Name, err)
	}
	hibernate := c.Spec.Hibernating()
	if !hibernate {
		off := 0
		for _, m := range machines {
			if m.PoweredOff {
				off++
			}
		}
		if off == 0 {
			return true, nil
		}
		up, err := d.apiServerAvailable(ctx, c.Name)
		if err != nil || !up {
			return false, err
		}
	}
	var errs []error
	for _, m := range machines {
		switch {
		case hibernate && m.State == localcloud.StateStopped:
		case !hibernate && !m.PoweredOff:
		default:
			if _, err := cloud.Power(ctx, c.Name, m.Name, !hibernate); err != nil {
				errs = append(errs, fmt.Errorf("power %s %v: %w", m.Name, !hibernate, err))
				continue
			}
			log.Info("machine powered", "machine", m.Name, "on", !hibernate)
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// apiServerAvailable reports whether componentd reports the cluster's kube-apiserver
// Available.
func (d *Daemon) apiServerAvailable(ctx context.Context, cluster string) (bool, error) {
	comp, _, err := d.components.Get(ctx, api.ComponentKey(cluster, api.ComponentKubeAPIServer))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return comp.Status.Conditions.IsTrue(api.ConditionAvailable), nil
}

// requestWake records in the cluster's infra record that a connection reached its endpoint
// while it hibernates (wakeRequested) and publishes infra.ready, so clusterd wakes it.
func (d *Daemon) requestWake(cluster string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := d.clock().Now().UTC()
	var sent outbox.Entry
	_, _, err := d.infra.MutateBefore(ctx, cluster, false, func(inf *api.Infra) error {
		inf.WakeRequested = &now
		return nil
	}, func(ctx context.Context, _ *api.Infra) error {
		var err error
		sent, err = d.record(ctx, cluster, VerbReady)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the wake request of %s: %w", cluster, err)
	}
	d.outbox.Send(ctx, sent)
	return nil
}

// syncAsleep puts the cluster's balancer in wake-on-connect mode once the cluster fully
// hibernates: its machines are off (inf.Hibernated) and componentd recorded kube-apiserver
// hibernated. Not before: a kubelet or kube-controller-manager still running while the
// cluster goes to sleep must not wake it again. Out of that mode as soon as the spec says
// awake.
func (d *Daemon) syncAsleep(ctx context.Context, c *api.Cluster, inf *api.Infra) error {
	d.mu.Lock()
	b := d.lbs[c.Name]
	d.mu.Unlock()
	if b == nil || !b.Wakes() {
		return nil
	}
	asleep := false
	if c.Spec.Hibernating() && inf.Hibernated {
		comp, _, err := d.components.Get(ctx, api.ComponentKey(c.Name, api.ComponentKubeAPIServer))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if comp != nil {
			cond, _ := comp.Status.Conditions.Get(api.ConditionAvailable)
			asleep = cond.Reason == api.ReasonHibernated
		}
	}
	b.SetAsleep(asleep)
	return nil
}

// clock is the daemon's clock (daemon.Base.Clock, the real one when unset).
func (d *Daemon) clock() clock.WithTicker {
	if d.cfg.Clock != nil {
		return d.cfg.Clock
	}
	return clock.RealClock{}
}

// recordActivity writes (every ActivityInterval of the daemon's clock) when each wake-capable
// balancer last accepted a client connection into its cluster's infra record (lastActivity),
// where clusterd compares it with spec.hibernation.idleAfter. A connection is what counts:
// requests on a connection kept open (a kubelet's heartbeats) do not.
func (d *Daemon) recordActivity(ctx context.Context) {
	d.mu.Lock()
	seen := map[string]time.Time{}
	for cluster, b := range d.lbs {
		if at := b.LastAccept(); !at.IsZero() {
			seen[cluster] = at
		}
	}
	d.mu.Unlock()
	for cluster, at := range seen {
		_, _, err := d.infra.Mutate(ctx, cluster, false, func(inf *api.Infra) error {
			if inf.LastActivity != nil && !at.After(*inf.LastActivity) {
				return store.ErrNoChange
			}
			inf.LastActivity = &at
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			d.Logger().Warn("record the endpoint's last connection", "cluster", cluster, "err", err)
		}
	}
}
