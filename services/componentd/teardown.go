package componentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// teardown removes the process runtime's workloads of a cluster that is deleting or gone:
// its processes (dependents first, whether this componentd or an earlier one started them)
// and its directory. It is idempotent and cheap when nothing is left.
func (d *Daemon) teardown(ctx context.Context, log *slog.Logger, sup *process.Supervisor, cluster string) error {
	stopped, err := d.stopProcesses(ctx, sup, cluster)
	if err != nil {
		return err
	}
	dir := d.ClusterDir(cluster)
	_, statErr := os.Stat(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if stopped > 0 || statErr == nil {
		log.Info("control-plane processes stopped", "processes", stopped)
	}
	return nil
}

// stopProcesses stops every process of the cluster's control plane, dependents first, and
// returns how many it stopped.
func (d *Daemon) stopProcesses(ctx context.Context, sup *process.Supervisor, cluster string) (int, error) {
	stopped := 0
	for _, tier := range stopTiers() {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, c := range tier {
			for n := range component.MaxReplicas() {
				name := component.ProcessName(cluster, c.Name, n)
				if !d.hasProcess(sup, name) {
					continue
				}
				stopped++
				wg.Go(func() {
					if err := sup.Terminate(ctx, name); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return stopped, err
		}
	}
	d.forgetRestarts(cluster)
	return stopped, nil
}

// stopTiers is the order components stop in, dependents first: kube-controller-manager and
// kube-scheduler (and the autoscaler) together, then kube-apiserver, then etcd.
func stopTiers() [][]*component.Component {
	comps := component.All()
	slices.Reverse(comps)
	tiers := [][]*component.Component{}
	for _, c := range comps {
		if n := len(tiers); n > 0 && slices.Equal(tiers[n-1][0].DependsOn, c.DependsOn) {
			tiers[n-1] = append(tiers[n-1], c)
			continue
		}
		tiers = append(tiers, []*component.Component{c})
	}
	return tiers
}

// forget deletes the controlplane keys of a cluster whose workloads are gone, publishing
// component.deleted for each, and drops its metrics. It is idempotent.
func (d *Daemon) forget(ctx context.Context, log *slog.Logger, cluster string) error {
	keys, err := d.components.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return err
	}
	for _, k := range keys {
		comp := strings.TrimPrefix(k, cluster+".")
		sent, err := d.rt.Outbox.Record(ctx, cluster, events.ResourceComponent, VerbDeleted, cluster+"/"+comp, nil)
		if err != nil {
			return err
		}
		if err := d.components.Delete(ctx, k, 0); err != nil {
			return err
		}
		d.rt.Outbox.Send(ctx, sent)
	}
	d.metrics.forget(cluster)
	if len(keys) > 0 {
		log.Info("control plane removed", "keys", len(keys))
	}
	return nil
}

// hasProcess reports whether sup runs name or an earlier supervisor left its pidfile.
func (d *Daemon) hasProcess(sup *process.Supervisor, name string) bool {
	if _, ok := sup.Get(name); ok {
		return true
	}
	_, err := os.Stat(fmt.Sprintf("%s/%s.pid", sup.Dir(), name))
	return err == nil
}
