package componentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/hostplane/hostplane/pkg/api"
	hpobserve "github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// adoptWait bounds how long a reconcile waits for re-adopted processes to pass their probe,
// so a componentd restart does not report a healthy control plane as unavailable.
const adoptWait = 5 * time.Second

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
	res, err := d.reconcileCluster(ctx, d.log.With("cluster", name), name)
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
	return d.workloads.converge(ctx, log, &clusterState{cluster: c, infra: inf, pki: pki, clusterRev: crev, pkiRev: pkiRev})
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

// processRuntime runs the components as child processes (RuntimeProcess).
type processRuntime struct{ d *Daemon }

var _ workloads = processRuntime{}

func (p processRuntime) converge(ctx context.Context, log *slog.Logger, cl *clusterState) (reconcile.Result, error) {
	d := p.d
	sup, err := d.supervisor()
	if err != nil {
		return reconcile.Result{}, err
	}
	name := cl.cluster.Name
	// A cluster restored from a backup also decrypts with the Secret encryption keys the
	// backup's Secrets were written with.
	pki, err := d.withRestoredKeys(ctx, cl.pki, cl.cluster.Spec.RestoreFrom)
	if err != nil {
		return reconcile.Result{}, err
	}
	files, err := component.Files(pki, d.seal)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &component.Inputs{
		Cluster:    name,
		Version:    cl.cluster.Spec.Release.Version,
		Policy:     cl.policy(),
		Infra:      *cl.infra,
		Networking: cl.cluster.Spec.Networking,
		Dir:        d.ClusterDir(name),
		Files:      files,
		Audit:      cl.cluster.Spec.EffectiveAudit(),
		PKISerial:  cl.pki.Serial,
		Tuning:     d.cfg.tuning,
	}
	if in.Autoscaler, err = d.autoscaler(ctx, cl.cluster); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if files[component.FileAuditPolicy], err = component.AuditPolicyFile(in.Audit); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if in.AdminCert, in.AdminKey, err = component.AdminCredentials(cl.pki, d.seal); err != nil {
		log.Warn("kube-apiserver probe runs anonymously", "err", err)
	}
	written, err := writeFiles(in.Dir, files)
	if len(written) > 0 {
		log.Info("wrote control-plane files", "files", written, "pki_serial", cl.pki.Serial)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	etcd, err := newEtcdAccess(in)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if err := d.restoreInPlace(ctx, log, sup, cl, in, etcd); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: in-place restore: %w", name, err)
	}
	if err := d.restoreNew(ctx, log, cl, in, etcd); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: restore from backup: %w", name, err)
	}
	res, err := d.converge(ctx, log, sup, cl.cluster, in)
	if err != nil {
		return res, err
	}
	rec, _, err := getOptional(ctx, d.components, api.ComponentKey(name, api.ComponentEtcd))
	if err != nil {
		return res, err
	}
	etcd.available = rec != nil && rec.Status.Conditions.IsTrue(api.ConditionAvailable)
	return d.backupStep(ctx, log, cl, etcd, res)
}

func (p processRuntime) remove(ctx context.Context, log *slog.Logger, cluster string) (bool, error) {
	sup, err := p.d.supervisor()
	if err != nil {
		return false, err
	}
	return true, p.d.teardown(ctx, log, sup, cluster)
}

// converge walks the components in dependency order: each one moves toward its desired
// config only as far as its dependencies allow, then its status is recorded.
func (d *Daemon) converge(ctx context.Context, log *slog.Logger, sup *process.Supervisor, c *api.Cluster, in *component.Inputs) (reconcile.Result, error) {
	byName, err := d.records(ctx, c.Name)
	if err != nil {
		return reconcile.Result{}, err
	}

	observed := map[string]rollout.Summary{}
	settled, waitingForBuild := true, false
	for _, comp := range component.All() {
		clog := log.With("component", comp.Name)
		want, err := comp.Desired(in)
		if errors.Is(err, release.ErrBinaryMissing) {
			// The release is not built here yet (a first run builds the others in the
			// background): say so and look again; whatever runs keeps running.
			sum, err := d.recordReleaseNotBuilt(ctx, clog, c.Name, comp, in, byName[comp.Name])
			if err != nil {
				return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
			}
			observed[comp.Name] = sum
			settled, waitingForBuild = false, true
			continue
		}
		if errors.Is(err, component.ErrCannotRun) {
			// The autoscaler without its executable or the management kubeconfig: the
			// control plane runs on, and the component's status says what is missing.
			sum, err2 := d.recordCannotRun(ctx, clog, c.Name, comp, in, byName[comp.Name], ReasonCannotRun, err.Error())
			if err2 != nil {
				return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err2)
			}
			observed[comp.Name] = sum
			continue
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		gate := rollout.Gate{Available: true, Settled: true}
		for _, dep := range comp.StartsAfter() {
			gate.Available = gate.Available && observed[dep].Available
		}
		for _, dep := range comp.DependsOn {
			s := observed[dep]
			gate.Settled = gate.Settled && gate.Available && s.Available && s.Complete
		}
		old := byName[comp.Name]
		reps, err := d.rollOut(ctx, clog, c.Name, sup, want, old, gate)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		if err := d.stopExtra(ctx, clog, sup, c.Name, want); err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		sum, err := d.recordProcesses(ctx, clog, c.Name, want, old, reps, gate, in.PKISerial)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		observed[comp.Name] = sum
		settled = settled && sum.Available && sum.Complete
	}
	if waitingForBuild {
		return reconcile.Result{RequeueAfter: releaseBuildPoll}, nil
	}
	return d.requeue(settled), nil
}

// stopExtra stops the replicas of a component beyond those it wants (the autoscaler once the
// cluster has no autoscaled pool left).
func (d *Daemon) stopExtra(ctx context.Context, log *slog.Logger, sup *process.Supervisor, cluster string, want component.Desired) error {
	for n := want.Replicas; n < component.MaxReplicas(); n++ {
		name := component.ProcessName(cluster, want.Component.Name, n)
		if !d.hasProcess(sup, name) {
			continue
		}
		log.Info("stopping replica: no longer wanted", "replica", name, "replicas", want.Replicas)
		if err := sup.Terminate(ctx, name); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	return nil
}

// replica is what the reconcile knows of one replica.
type replica struct {
	rollout.Replica
	name       string
	supervised bool
	draining   bool           // marked for the load balancer before it is replaced
	status     process.Status // of the supervised process; only Pid otherwise
}

// rollOut re-adopts replicas that run the desired config, starts those that run nothing and
// replaces one that runs an older config, as far as gate allows; it returns what runs then.
func (d *Daemon) rollOut(ctx context.Context, log *slog.Logger, cluster string, sup *process.Supervisor, want component.Desired,
	old *store.Entry[api.ControlPlaneComponent], gate rollout.Gate) ([]replica, error) {
	if err := d.adopt(ctx, log, sup, want, old); err != nil {
		return nil, err
	}
	reps := observe(sup, want, old)
	step := rollout.Next(want.Hash, replicasOf(reps), gate)
	step.Start = oneFirst(log, want, reps, step.Start, time.Now())
	for _, i := range step.Start {
		log.Info("starting replica", "replica", want.Specs[i].Name, "version", want.Version, "config_hash", want.Hash)
		p, err := d.startReplica(ctx, "componentd start "+want.Component.Name, sup, want, i)
		if err != nil {
			return nil, err
		}
		d.notifyReady(p, cluster)
	}
	if i := step.Replace; i >= 0 && d.drain(log, want, reps, i) {
		return reps, nil // replaced once the load balancer had time to stop sending to it
	}
	if i := step.Replace; i >= 0 {
		log.Info("rolling replica", "replica", want.Specs[i].Name, "from_hash", reps[i].Hash,
			"config_hash", want.Hash, "version", want.Version)
		// Start stops the process running an older spec, then starts this one.
		p, err := d.startReplica(ctx, "componentd roll "+want.Component.Name, sup, want, i)
		if err != nil {
			return nil, err
		}
		d.notifyReady(p, cluster)
	}
	if len(step.Start) > 0 || step.Replace >= 0 {
		reps = observe(sup, want, old)
	}
	return reps, nil
}

// startReplica starts replica i of want in a span of its own.
func (d *Daemon) startReplica(ctx context.Context, span string, sup *process.Supervisor, want component.Desired, i int) (p *process.Process, err error) {
	ctx, s := hpobserve.StartSpan(ctx, span,
		attribute.String("hostplane.component", want.Component.Name),
		attribute.String("hostplane.replica", want.Specs[i].Name),
		attribute.String("hostplane.version", want.Version),
		attribute.String("hostplane.config_hash", want.Hash))
	defer func() { hpobserve.EndSpan(s, err) }()
	return sup.Start(ctx, want.Specs[i])
}

// notifyReady asks for the cluster to be reconciled as soon as p is ready.
func (d *Daemon) notifyReady(p *process.Process, cluster string) {
	if d.ready != nil {
		d.ready.watch(p, cluster)
	}
}

// FirstReplicaWait bounds how long the other replicas of a load-balanced component wait
// for the one started first to be ready (see oneFirst): a first replica that is slow to
// start must not keep the others from trying.
const FirstReplicaWait = 20 * time.Second

// oneFirst returns the replicas of start to start now. While no replica of a load-balanced
// component running several (kube-apiserver of a HighlyAvailable cluster) is ready, one
// starts alone and the others once it is ready (the ready notifier re-enqueues the cluster
// then). They do not wait for one that has restarted (a crash loop), was not started by this
// componentd, or started FirstReplicaWait ago: all of that is in the supervisor's status, so
// nothing is kept here. Any one replica serves the clients infrad's balancer holds (a wake
// on connect): started alone, it gets the CPU the others would take and is ready seconds
// sooner. etcd members still start together (a quorum needs them).
func oneFirst(log *slog.Logger, want component.Desired, reps []replica, start []int, now time.Time) []int {
	if !want.Component.LoadBalanced || len(want.Specs) < 2 || len(start) == 0 {
		return start
	}
	if len(start) == len(reps) { // nothing runs yet: the first starts alone
		log.Info("starting one replica first; the others start once it is ready", "replica", want.Specs[start[0]].Name, "wait_at_most", FirstReplicaWait)
		return start[:1]
	}
	for _, r := range reps {
		if r.Ready {
			return start // one serves: the others start together
		}
		if r.Running && (!r.supervised || r.status.Restarts > 0 || now.Sub(r.status.StartedAt) >= FirstReplicaWait) {
			log.Warn("the replica started first is not ready: starting the others anyway", "replica", r.name, "restarts", r.status.Restarts)
			return start
		}
	}
	return nil
}

// DrainDelay is how long a load-balanced replica is marked draining (ReplicaStatus.Draining)
// before it is stopped: several of infrad's load-balancer probe intervals plus the time the
// mark takes to reach infrad (a KV write, its watch, its reconcile), so no new client
// connection reaches a replica that is about to go. 1.5 s was not enough on a loaded machine:
// an HA upgrade in CI had two new connections reach a kube-apiserver already shutting down.
// It is a delay, not an acknowledgement: infrad confirming the drain would close the gap.
const DrainDelay = 3 * time.Second

// drain reports whether replica i must wait before it is replaced: a ready replica of a
// LoadBalanced component running several replicas is first marked draining for DrainDelay.
// It marks reps[i] draining while it waits.
func (d *Daemon) drain(log *slog.Logger, want component.Desired, reps []replica, i int) bool {
	if !want.Component.LoadBalanced || len(want.Specs) < 2 || !reps[i].Ready {
		return false
	}
	key := want.Specs[i].Name + "/" + want.Hash
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	if d.draining == nil {
		d.draining = map[string]time.Time{}
	}
	since, ok := d.draining[key]
	if !ok {
		d.draining[key] = time.Now()
		log.Info("draining replica before replacing it", "replica", want.Specs[i].Name, "for", DrainDelay)
	}
	if !ok || time.Since(since) < DrainDelay {
		reps[i].draining = true
		return true
	}
	delete(d.draining, key)
	return false
}

// adopt re-adopts every replica that a previous componentd left running with the desired
// config: no dependency gates this, since nothing new starts. It waits a little for their
// probes so that the status recorded next says what is true: they are healthy.
func (d *Daemon) adopt(ctx context.Context, log *slog.Logger, sup *process.Supervisor, want component.Desired,
	old *store.Entry[api.ControlPlaneComponent]) error {
	var adopted []*process.Process
	for _, spec := range want.Specs {
		if _, ok := sup.Get(spec.Name); ok {
			continue
		}
		rs := previousReplica(old, spec.Name)
		if rs == nil || rs.ConfigHash != want.Hash || !leftRunning(sup, spec.Name, rs.Pid) {
			continue
		}
		p, err := sup.Start(ctx, spec)
		if err != nil {
			return err
		}
		st := p.Status()
		log.Info("re-adopted replica", "replica", spec.Name, "pid", st.Pid, "adopted", st.Adopted)
		adopted = append(adopted, p)
	}
	if len(adopted) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, adoptWait)
	defer cancel()
	for _, p := range adopted {
		_ = p.WaitReady(wctx) // not ready yet is reported in the status, not an error
	}
	return nil
}

// observe returns the state of every replica of want.
func observe(sup *process.Supervisor, want component.Desired, old *store.Entry[api.ControlPlaneComponent]) []replica {
	reps := make([]replica, len(want.Specs))
	for i, spec := range want.Specs {
		r := replica{name: spec.Name}
		if p, ok := sup.Get(spec.Name); ok {
			st := p.Status()
			r.supervised, r.status = true, st
			r.Replica = rollout.Replica{Running: true, Hash: component.HashOf(p.Spec()), Ready: st.State == process.StateReady}
		} else if rs := previousReplica(old, spec.Name); rs != nil && leftRunning(sup, spec.Name, rs.Pid) {
			// Left running by a previous componentd with another config: the rollout
			// replaces it in turn.
			r.status.Pid = rs.Pid
			r.Replica = rollout.Replica{Running: true, Hash: rs.ConfigHash, Ready: rs.Ready}
		}
		reps[i] = r
	}
	return reps
}

func replicasOf(reps []replica) []rollout.Replica {
	out := make([]rollout.Replica, len(reps))
	for i, r := range reps {
		out[i] = r.Replica
	}
	return out
}

func previousReplica(old *store.Entry[api.ControlPlaneComponent], name string) *api.ReplicaStatus {
	if old == nil {
		return nil
	}
	for i := range old.Value.Status.Replicas {
		if old.Value.Status.Replicas[i].Name == name {
			return &old.Value.Status.Replicas[i]
		}
	}
	return nil
}

// leftRunning reports whether the replica a previous componentd recorded with pid still
// runs: its pidfile names that very process (a pid the system reused for another one, after
// a reboot or a stop of everything, does not count).
func leftRunning(sup *process.Supervisor, name string, pid int) bool {
	got, ok := sup.LeftRunning(name)
	return ok && got == pid
}
