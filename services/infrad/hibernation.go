package infrad

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hostplane/hostplane/pkg/api"
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
	if p == nil || p.cloud == nil {
		return true, nil // no machine here to stop
	}
	machines, err := p.cloud.List(ctx, c.Name)
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
			if _, err := p.cloud.Power(ctx, c.Name, m.Name, !hibernate); err != nil {
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
