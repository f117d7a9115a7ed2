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

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// teardown removes everything componentd has for a cluster that is deleting or gone: its
// processes (dependents first, whether this componentd or an earlier one started them), its
// directory and its controlplane keys, publishing component.deleted for each key. It is
// idempotent and cheap when nothing is left.
func (d *Daemon) teardown(ctx context.Context, log *slog.Logger, sup *process.Supervisor, cluster string) (reconcile.Result, error) {
	comps := component.All()
	slices.Reverse(comps)
	// kube-controller-manager and kube-scheduler together, then kube-apiserver, then etcd.
	tiers := [][]*component.Component{}
	for _, c := range comps {
		if n := len(tiers); n > 0 && slices.Equal(tiers[n-1][0].DependsOn, c.DependsOn) {
			tiers[n-1] = append(tiers[n-1], c)
			continue
		}
		tiers = append(tiers, []*component.Component{c})
	}
	stopped := 0
	for _, tier := range tiers {
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
			return reconcile.Result{}, err
		}
	}
	d.forgetRestarts(cluster)

	dir := d.ClusterDir(cluster)
	_, statErr := os.Stat(dir)
	if err := os.RemoveAll(dir); err != nil {
		return reconcile.Result{}, fmt.Errorf("remove %s: %w", dir, err)
	}
	keys, err := d.components.Keys(ctx, cluster+".*")
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, k := range keys {
		if err := d.components.Delete(ctx, k, 0); err != nil {
			return reconcile.Result{}, err
		}
		comp := strings.TrimPrefix(k, cluster+".")
		if _, err := d.rt.Publisher.Publish(ctx, cluster, events.ResourceComponent, VerbDeleted, cluster+"/"+comp, nil); err != nil {
			return reconcile.Result{}, err
		}
	}
	d.metrics.forget(cluster)
	if stopped > 0 || statErr == nil || len(keys) > 0 {
		log.Info("control plane removed", "processes", stopped, "keys", len(keys))
	}
	return reconcile.Result{}, nil
}

// hasProcess reports whether sup runs name or an earlier supervisor left its pidfile.
func (d *Daemon) hasProcess(sup *process.Supervisor, name string) bool {
	if _, ok := sup.Get(name); ok {
		return true
	}
	_, err := os.Stat(fmt.Sprintf("%s/%s.pid", sup.Dir(), name))
	return err == nil
}
