package procruntime

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
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// adoptWait bounds how long a converge waits for re-adopted processes to pass their probe,
// so a componentd restart does not report a healthy control plane as unavailable.
const adoptWait = 5 * time.Second

// Progress is where a Converge left the cluster's control plane.
type Progress struct {
	// Settled: every component is Available and RolloutComplete.
	Settled bool
	// WaitingForRelease: a component's release has no binaries on this host yet.
	WaitingForRelease bool
}

// Converge walks the components of the cluster in (in.Cluster) in dependency order: each one
// moves toward its desired config only as far as its dependencies allow, then its state is
// recorded with rec. The cluster's files must be written already (WriteFiles into
// in.Dir). It returns ErrStopped once the runtime is closed.
func (r *Runtime) Converge(ctx context.Context, log *slog.Logger, in *component.Inputs, rec Recorder) (Progress, error) {
	sup, err := r.supervisor()
	if err != nil {
		return Progress{}, err
	}
	cluster := in.Cluster
	byName, err := rec.Records(ctx, cluster)
	if err != nil {
		return Progress{}, err
	}

	observed := map[string]rollout.Summary{}
	settled, waitingForBuild := true, false
	for _, comp := range component.All() {
		clog := log.With("component", comp.Name)
		want, err := comp.Desired(in)
		if errors.Is(err, release.ErrBinaryMissing) {
			// The release is not built here yet (a first run builds the others in the
			// background): say so and look again; whatever runs keeps running.
			sum, err := rec.ReleaseNotBuilt(ctx, clog, cluster, comp, in, byName[comp.Name])
			if err != nil {
				return Progress{}, fmt.Errorf("%s: %w", comp.Name, err)
			}
			observed[comp.Name] = sum
			settled, waitingForBuild = false, true
			continue
		}
		if errors.Is(err, component.ErrCannotRun) {
			// The autoscaler without its executable or the management kubeconfig: the
			// control plane runs on, and the component's status says what is missing.
			sum, err2 := rec.CannotRun(ctx, clog, cluster, comp, in, byName[comp.Name], err.Error())
			if err2 != nil {
				return Progress{}, fmt.Errorf("%s: %w", comp.Name, err2)
			}
			observed[comp.Name] = sum
			continue
		}
		if err != nil {
			return Progress{}, fmt.Errorf("%s: %w", comp.Name, err)
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
		reps, err := r.rollOut(ctx, clog, cluster, sup, want, old, gate)
		if err != nil {
			return Progress{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		if err := r.stopExtra(ctx, clog, sup, cluster, want); err != nil {
			return Progress{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		sum, err := r.record(ctx, clog, rec, cluster, want, old, reps, gate, in.PKISerial)
		if err != nil {
			return Progress{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		observed[comp.Name] = sum
		settled = settled && sum.Available && sum.Complete
	}
	return Progress{Settled: settled, WaitingForRelease: waitingForBuild}, nil
}

// stopExtra stops the replicas of a component beyond those it wants (the autoscaler once the
// cluster has no autoscaled pool left).
func (r *Runtime) stopExtra(ctx context.Context, log *slog.Logger, sup *process.Supervisor, cluster string, want component.Desired) error {
	for n := want.Replicas; n < component.MaxReplicas(); n++ {
		name := component.ProcessName(cluster, want.Component.Name, n)
		if !hasProcess(sup, name) {
			continue
		}
		log.Info("stopping replica: no longer wanted", "replica", name, "replicas", want.Replicas)
		if err := sup.Terminate(ctx, name); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	return nil
}

// replica is what the converge knows of one replica.
type replica struct {
	rollout.Replica
	name       string
	supervised bool
	draining   bool           // marked for the load balancer before it is replaced
	status     process.Status // of the supervised process; only Pid otherwise
}

// rollOut re-adopts replicas that run the desired config, starts those that run nothing and
// replaces one that runs an older config, as far as gate allows; it returns what runs then.
func (r *Runtime) rollOut(ctx context.Context, log *slog.Logger, cluster string, sup *process.Supervisor, want component.Desired,
	old *store.Entry[api.ControlPlaneComponent], gate rollout.Gate) ([]replica, error) {
	if err := adopt(ctx, log, sup, want, old); err != nil {
		return nil, err
	}
	reps := observe(sup, want, old)
	step := rollout.Next(want.Hash, replicasOf(reps), gate)
	step.Start = oneFirst(log, want, reps, step.Start, time.Now())
	for _, i := range step.Start {
		log.Info("starting replica", "replica", want.Specs[i].Name, "version", want.Version, "config_hash", want.Hash)
		p, err := startReplica(ctx, "componentd start "+want.Component.Name, sup, want, i)
		if err != nil {
			return nil, err
		}
		r.ready.watch(p, cluster)
	}
	if i := step.Replace; i >= 0 && r.drain(log, want, reps, i) {
		return reps, nil // replaced once the load balancer had time to stop sending to it
	}
	if i := step.Replace; i >= 0 {
		log.Info("rolling replica", "replica", want.Specs[i].Name, "from_hash", reps[i].Hash,
			"config_hash", want.Hash, "version", want.Version)
		// Start stops the process running an older spec, then starts this one.
		p, err := startReplica(ctx, "componentd roll "+want.Component.Name, sup, want, i)
		if err != nil {
			return nil, err
		}
		r.ready.watch(p, cluster)
	}
	if len(step.Start) > 0 || step.Replace >= 0 {
		reps = observe(sup, want, old)
	}
	return reps, nil
}

// startReplica starts replica i of want in a span of its own.
func startReplica(ctx context.Context, span string, sup *process.Supervisor, want component.Desired, i int) (p *process.Process, err error) {
	ctx, s := hpobserve.StartSpan(ctx, span,
		attribute.String("hostplane.component", want.Component.Name),
		attribute.String("hostplane.replica", want.Specs[i].Name),
		attribute.String("hostplane.version", want.Version),
		attribute.String("hostplane.config_hash", want.Hash))
	defer func() { hpobserve.EndSpan(s, err) }()
	return sup.Start(ctx, want.Specs[i])
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
func (r *Runtime) drain(log *slog.Logger, want component.Desired, reps []replica, i int) bool {
	if !want.Component.LoadBalanced || len(want.Specs) < 2 || !reps[i].Ready {
		return false
	}
	key := want.Specs[i].Name + "/" + want.Hash
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	if r.draining == nil {
		r.draining = map[string]time.Time{}
	}
	since, ok := r.draining[key]
	if !ok {
		r.draining[key] = time.Now()
		log.Info("draining replica before replacing it", "replica", want.Specs[i].Name, "for", DrainDelay)
	}
	if !ok || time.Since(since) < DrainDelay {
		reps[i].draining = true
		return true
	}
	delete(r.draining, key)
	return false
}

// adopt re-adopts every replica that a previous componentd left running with the desired
// config: no dependency gates this, since nothing new starts. It waits a little for their
// probes so that the status recorded next says what is true: they are healthy.
func adopt(ctx context.Context, log *slog.Logger, sup *process.Supervisor, want component.Desired,
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
