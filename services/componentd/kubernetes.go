package componentd

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// kubeRuntime runs the components as workloads in the management cluster
// (RuntimeKubernetes, package kuberuntime).
type kubeRuntime struct {
	d  *Daemon
	rt *kuberuntime.Runtime

	mu      sync.Mutex
	applied map[string]applied // cluster → its last Apply
}

// applied is what the last Apply of a cluster wrote, and from which records.
type applied struct {
	clusterRev, pkiRev uint64
	// autoscaler is whether the autoscaler was enabled: it follows the node pools, which
	// the cluster's revision does not cover.
	autoscaler bool
	// held is Inputs.Held: the Apply that releases a waking cluster's hold is not skipped.
	held   []string
	at     time.Time
	hashes map[string]string // component → config hash
}

var (
	_ workloads  = (*kubeRuntime)(nil)
	_ hibernator = (*kubeRuntime)(nil)
)

func newKubeRuntime(d *Daemon, rt *kuberuntime.Runtime) *kubeRuntime {
	return &kubeRuntime{d: d, rt: rt, applied: map[string]applied{}}
}

// converge applies the cluster's objects and records each component from its workload's
// status. Apply writes every component at once: no component waits for its dependencies
// (their pods wait for them instead), except on a wake from hibernation, where
// kube-controller-manager, kube-scheduler and the autoscaler stay at 0 replicas until
// kube-apiserver is Available (kuberuntime.HeldOnWake, decided afresh from the workloads
// each time) and their records say WaitingForDependencies meanwhile.
func (k *kubeRuntime) converge(ctx context.Context, log *slog.Logger, cl *clusterState) (reconcile.Result, error) {
	d, name := k.d, cl.cluster.Name
	rel, err := release.Lookup(cl.cluster.Spec.Release.Version)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if from := cl.cluster.Spec.RestoreFrom; from != nil {
		// Starting etcd empty would drop what the user asked for without a word: say so
		// and apply nothing (docs/backups.md).
		comp, err := component.Lookup(api.ComponentEtcd)
		if err != nil {
			return reconcile.Result{}, err
		}
		byName, err := d.records(ctx, name)
		if err != nil {
			return reconcile.Result{}, err
		}
		in := &component.Inputs{Cluster: name, Version: rel.Version, Policy: cl.policy()}
		_, err = d.recordDown(ctx, log, name, comp, in, byName[api.ComponentEtcd], ReasonRestoreFailed,
			fmt.Sprintf("spec.restoreFrom (%s/%s) needs the process runtime; this componentd runs the kubernetes runtime, which cannot restore etcd", from.Cluster, from.Backup), false)
		return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, err
	}
	as, err := d.autoscaler(ctx, cl.cluster)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	status, err := k.rt.Status(ctx, name)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	held := kuberuntime.HeldOnWake(status)
	hashes, wrote, err := k.apply(ctx, log, cl, rel, as, held)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if wrote {
		if status, err = k.rt.Status(ctx, name); err != nil {
			return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	byName, err := d.records(ctx, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	open := rollout.Gate{Available: true, Settled: true}
	settled := true
	for _, comp := range component.All() {
		hash := hashes[comp.Name]
		replicas := kuberuntime.Replicas(comp.Name, cl.policy())
		if comp.Name == api.ComponentKarpenter && !as.Enabled {
			replicas = 0 // Apply deleted its Deployment
		}
		o := component.Observation{Component: comp, Version: rel.Version, Replicas: replicas, Hash: hash, Gate: open, PKISerial: cl.pki.Serial}
		if s, ok := status[comp.Name]; ok {
			o.Summary = rollout.Summary{
				Ready:     int(s.ReadyReplicas),
				Updated:   int(min(s.UpdatedReplicas, s.ReadyReplicas)),
				Available: s.Available,
				Complete:  s.RolloutComplete && s.ConfigHash == hash,
			}
			o.NotReady = fmt.Sprintf(" (%s %s/%s)", s.Kind, kuberuntime.Namespace(name), comp.Name)
		} else {
			o.NotReady = fmt.Sprintf(" (no workload in %s yet)", kuberuntime.Namespace(name))
		}
		if replicas == 0 && o.Summary.Ready == 0 {
			// Idle (the autoscaler without an autoscaled pool), as in the process runtime:
			// settled, nothing to wait for.
			o.Summary.Available, o.Summary.Complete = true, true
		} else if slices.Contains(held, comp.Name) {
			// Held at 0 until kube-apiserver is Available: waiting for it, not unready.
			o.Gate, o.WaitingFor = rollout.Gate{}, []string{api.ComponentKubeAPIServer}
			o.Summary.Available, o.Summary.Complete = false, false
		}
		if err := d.record(ctx, log.With("component", comp.Name), name, byName[comp.Name], o); err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		settled = settled && o.Summary.Available && o.Summary.Complete
	}
	return d.requeue(settled), nil
}

// hibernate scales every workload of the cluster's control plane to 0 and, once no pod of
// it is left, records each component hibernated; until then it looks again every
// ProgressInterval and leaves the records as they are. The namespace, etcd's volumes, the
// Secrets and Services stay: waking is an ordinary converge, whose Apply sets the replicas
// again (kuberuntime.Runtime.Hibernate), etcd's and kube-apiserver's first (see converge),
// and the records follow the pods' real status.
func (k *kubeRuntime) hibernate(ctx context.Context, log *slog.Logger, c *api.Cluster) (reconcile.Result, error) {
	k.forgetApplied(c.Name) // the wake applies at once, whatever the revisions
	p, err := k.rt.Hibernate(ctx, c.Name)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: hibernate: %w", c.Name, err)
	}
	if !p.Stopped {
		log.Debug("hibernating: waiting for the control-plane pods to go", "namespace", kuberuntime.Namespace(c.Name), "pods", p.Pods)
		return reconcile.Result{RequeueAfter: k.d.cfg.ProgressInterval}, nil
	}
	if err := k.d.recordHibernated(ctx, log, c); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: k.d.cfg.SteadyInterval}, nil
}

// apply applies the cluster's objects, with held's components at 0 replicas, and returns
// each component's config hash and whether it wrote. It skips the Apply when neither the
// cluster nor the PKI record nor held changed since the last one, unless that is
// SteadyInterval old, so a rollout polled every ProgressInterval does not rewrite every
// object each time, and drift is still repaired.
func (k *kubeRuntime) apply(ctx context.Context, log *slog.Logger, cl *clusterState, rel release.Release,
	as component.Autoscaler, held []string) (map[string]string, bool, error) {
	name := cl.cluster.Name
	k.mu.Lock()
	last, ok := k.applied[name]
	k.mu.Unlock()
	if ok && last.clusterRev == cl.clusterRev && last.pkiRev == cl.pkiRev && last.autoscaler == as.Enabled &&
		slices.Equal(last.held, held) && time.Since(last.at) < k.d.cfg.SteadyInterval {
		return last.hashes, false, nil
	}
	switch {
	case len(held) > 0 && !slices.Equal(last.held, held):
		log.Info("waking: holding "+strings.Join(held, ", ")+" until kube-apiserver is Available", "held", held)
	case len(held) == 0 && len(last.held) > 0:
		log.Info("waking: kube-apiserver is Available; starting "+strings.Join(last.held, ", "), "released", last.held)
	}
	objs, err := k.rt.Apply(ctx, kuberuntime.Inputs{
		Cluster:     name,
		Policy:      cl.policy(),
		Release:     rel,
		PKI:         cl.pki,
		Seal:        k.d.seal,
		ServiceCIDR: cl.cluster.Spec.Networking.ServiceCIDR,
		PodCIDR:     cl.cluster.Spec.Networking.PodCIDR,
		Audit:       cl.cluster.Spec.EffectiveAudit(),
		Tuning:      k.d.cfg.tuning,
		Karpenter: kuberuntime.Karpenter{
			Enabled: as.Enabled,
			Image:   k.d.cfg.KarpenterImage,
			Options: as.Options,
		},
		Held: held,
	})
	if err != nil {
		k.forgetApplied(name)
		return nil, false, err
	}
	if !maps.Equal(last.hashes, objs.ConfigHashes) {
		log.Info("applied the control plane to the management cluster", "namespace", kuberuntime.Namespace(name),
			"version", rel.Version, "pki_serial", cl.pki.Serial, "config_hashes", objs.ConfigHashes)
	}
	k.mu.Lock()
	k.applied[name] = applied{clusterRev: cl.clusterRev, pkiRev: cl.pkiRev, autoscaler: as.Enabled, held: held,
		at: time.Now(), hashes: objs.ConfigHashes}
	k.mu.Unlock()
	return objs.ConfigHashes, true, nil
}

func (k *kubeRuntime) forgetApplied(cluster string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.applied, cluster)
}

// remove deletes the cluster's objects and namespace. The workloads are gone once the
// namespace is, or, while the namespace is still terminating, once no Deployment or
// StatefulSet of the cluster is left: a management cluster without a namespace controller
// (kube-controller-manager) never finishes deleting a namespace, and the control plane is
// gone without it (see the package documentation).
func (k *kubeRuntime) remove(ctx context.Context, log *slog.Logger, cluster string) (bool, error) {
	k.forgetApplied(cluster)
	p, err := k.rt.Delete(ctx, cluster)
	if err != nil {
		return false, err
	}
	if p.Gone {
		return true, nil
	}
	left, err := k.rt.Status(ctx, cluster)
	if err != nil {
		return false, err
	}
	if len(left) > 0 {
		log.Debug("waiting for the control-plane workloads to be deleted", "workloads", len(left), "namespace", p.Message)
		return false, nil
	}
	if keys, err := k.d.components.Keys(ctx, api.ClusterPartsFilter(cluster)); err == nil && len(keys) > 0 { // said once
		log.Info("control-plane workloads deleted; the namespace is left to the management cluster's namespace controller",
			"namespace", p.Message)
	}
	return true, nil
}
