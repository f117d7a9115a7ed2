package procruntime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// ReasonCrashLooping is a component's Degraded reason while a replica that is not ready
// restarted crashLoopRestarts times or more.
const ReasonCrashLooping = "CrashLooping"

// crashLoopRestarts is how many restarts of a replica that is not ready make it Degraded.
const crashLoopRestarts = 2

// record records a component from its replicas.
func (r *Runtime) record(ctx context.Context, log *slog.Logger, rec Recorder, cluster string, want component.Desired,
	old *store.Entry[api.ControlPlaneComponent], reps []replica, gate rollout.Gate, pkiSerial string) (rollout.Summary, error) {
	comp := want.Component
	o := component.Observation{
		Component: comp, Version: want.Version, Replicas: want.Replicas, Hash: want.Hash, PKISerial: pkiSerial,
		Summary:       rollout.Summarise(want.Hash, replicasOf(reps), comp.Quorum(want.Replicas)),
		Gate:          gate,
		ReplicaStatus: make([]api.ReplicaStatus, len(reps)),
		NotReady:      lastErrors(reps),
	}
	if want.Replicas == 0 && o.Summary.Ready == 0 {
		// Idle (the autoscaler without an autoscaled pool): settled, nothing to wait for.
		o.Summary.Available, o.Summary.Complete = true, true
	}
	var crashing []string
	for i, rp := range reps {
		rs := api.ReplicaStatus{Name: rp.name, Pid: rp.status.Pid, Ready: rp.Running && rp.Ready, Draining: rp.draining}
		if rp.Running {
			rs.ConfigHash = rp.Hash
		}
		prev := previousReplica(old, rp.name)
		switch {
		case rp.Running && rp.Hash == want.Hash:
			rs.Version = want.Version
		case prev != nil && prev.ConfigHash == rs.ConfigHash:
			rs.Version = prev.Version
		}
		delta := r.countRestarts(cluster, comp.Name, rp)
		if prev != nil && prev.ConfigHash == rs.ConfigHash {
			rs.Restarts = prev.Restarts
		}
		rs.Restarts += delta
		o.ReplicaStatus[i] = rs
		if rp.supervised && rp.status.State != process.StateReady && rp.status.Restarts >= crashLoopRestarts {
			crashing = append(crashing, fmt.Sprintf("%s restarted %d times (last: %s)", rp.name, rp.status.Restarts, rp.status.LastError))
		}
	}
	if len(crashing) > 0 {
		o.Degraded, o.DegradedReason = strings.Join(crashing, "; "), ReasonCrashLooping
	}
	return o.Summary, rec.Record(ctx, log, cluster, old, o)
}

// lastErrors describes why replicas are not ready, for condition messages.
func lastErrors(reps []replica) string {
	var b strings.Builder
	for _, r := range reps {
		if r.Ready || !r.supervised || r.status.LastError == "" {
			continue
		}
		msg := r.status.LastError
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		fmt.Fprintf(&b, "; %s: %s", r.name, msg)
	}
	return b.String()
}

// countRestarts returns how many restarts of rp the supervisor made since the last look, and
// counts them with Config.Restarted.
func (r *Runtime) countRestarts(cluster, comp string, rp replica) int {
	if !rp.supervised {
		return 0
	}
	r.restartsMu.Lock()
	last := r.restarts[rp.name]
	r.restarts[rp.name] = rp.status.Restarts
	r.restartsMu.Unlock()
	delta := rp.status.Restarts - last
	if delta < 0 { // a new process object: replaced or re-adopted
		delta = rp.status.Restarts
	}
	if delta > 0 && r.cfg.Restarted != nil {
		r.cfg.Restarted(cluster, comp, delta)
	}
	return delta
}

func (r *Runtime) forgetRestarts(cluster string) {
	r.restartsMu.Lock()
	defer r.restartsMu.Unlock()
	for name := range r.restarts {
		if strings.HasPrefix(name, cluster+"-") {
			delete(r.restarts, name)
		}
	}
}
