package procruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// Hibernate stops every process of the cluster's control plane, dependents first. The
// cluster's directory (etcd's data, the certificates and kubeconfigs) stays: waking is an
// ordinary Converge that starts the same processes on the same data. It finds nothing to
// stop when the cluster hibernates already.
func (r *Runtime) Hibernate(ctx context.Context, log *slog.Logger, cluster string) error {
	stopped, err := r.Stop(ctx, cluster)
	if err != nil {
		return fmt.Errorf("cluster %s: hibernate: %w", cluster, err) // ErrStopped too: errors.Is finds it
	}
	if stopped > 0 {
		log.Info("hibernating: control-plane processes stopped", "processes", stopped)
	}
	return nil
}

// Stop stops every process of the cluster's control plane, dependents first, and returns
// how many it stopped (an in-place restore stops the control plane so).
func (r *Runtime) Stop(ctx context.Context, cluster string) (int, error) {
	sup, err := r.supervisor()
	if err != nil {
		return 0, err
	}
	return r.stopProcesses(ctx, sup, cluster)
}

// Remove removes the workloads of a cluster that is deleting or gone: its processes
// (dependents first, whether this componentd or an earlier one started them) and its
// directory. It is idempotent and cheap when nothing is left.
func (r *Runtime) Remove(ctx context.Context, log *slog.Logger, cluster string) error {
	stopped, err := r.Stop(ctx, cluster)
	if err != nil {
		return err
	}
	dir := r.ClusterDir(cluster)
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
func (r *Runtime) stopProcesses(ctx context.Context, sup *process.Supervisor, cluster string) (int, error) {
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
				if !hasProcess(sup, name) {
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
	r.forgetRestarts(cluster)
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

// shutdownBatches splits process names ("<cluster>-<component>-<n>") into the batches
// StopAll stops one after the other, in stopTiers' order; names of no known component go in
// the first batch.
func shutdownBatches(names map[string]bool) [][]string {
	tiers := stopTiers()
	batches := make([][]string, len(tiers)+1)
	for n := range names {
		at := 0
		for i, tier := range tiers {
			for _, c := range tier {
				if isReplicaOf(n, c.Name) {
					at = i + 1
				}
			}
		}
		batches[at] = append(batches[at], n)
	}
	for _, b := range batches {
		slices.Sort(b)
	}
	return slices.DeleteFunc(batches, func(b []string) bool { return len(b) == 0 })
}

// isReplicaOf reports whether process name is a replica "<cluster>-<comp>-<n>" of comp.
func isReplicaOf(name, comp string) bool {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return false
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return false
	}
	return strings.HasSuffix(name[:i], "-"+comp)
}

// hasProcess reports whether sup runs name or an earlier supervisor left its pidfile.
func hasProcess(sup *process.Supervisor, name string) bool {
	if _, ok := sup.Get(name); ok {
		return true
	}
	_, err := os.Stat(fmt.Sprintf("%s/%s.pid", sup.Dir(), name))
	return err == nil
}
