package componentd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// adoptWait bounds how long a reconcile waits for re-adopted processes to pass their probe,
// so a componentd restart does not report a healthy control plane as unavailable.
const adoptWait = 5 * time.Second

// reconcile converges one cluster (key = cluster name).
func (d *Daemon) reconcile(ctx context.Context, name string) (reconcile.Result, error) {
	d.halt.RLock()
	defer d.halt.RUnlock()
	if d.halted.Load() {
		return reconcile.Result{}, nil
	}
	sup, err := d.supervisor()
	if err != nil {
		return reconcile.Result{}, nil // shutting down; the next componentd carries on
	}
	log := d.log.With("cluster", name)

	c, _, err := d.clusters.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return d.teardown(ctx, log, sup, name)
	case err != nil:
		return reconcile.Result{}, err
	case c.DeletionTimestamp != nil:
		return d.teardown(ctx, log, sup, name)
	}

	inf, err := getOptional(ctx, d.infra, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	pki, err := getOptional(ctx, d.pki, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if inf == nil || !inf.Ready || pki == nil || !pki.Ready {
		log.Debug("waiting for infra and pki to be ready", "infra", inf != nil && inf.Ready, "pki", pki != nil && pki.Ready)
		// Components that already run stay as they are; look again later in case an
		// event was missed.
		if keys, err := d.components.Keys(ctx, name+".*"); err == nil && len(keys) > 0 {
			return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, nil
		}
		return reconcile.Result{}, nil
	}

	files, err := component.Files(pki, d.seal)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &component.Inputs{
		Cluster:    name,
		Version:    c.Spec.Release.Version,
		Policy:     c.Spec.ControllerAvailabilityPolicy,
		Infra:      *inf,
		Networking: c.Spec.Networking,
		Dir:        d.ClusterDir(name),
		Files:      files,
	}
	if in.Policy == "" {
		in.Policy = api.SingleReplica
	}
	if in.AdminCert, in.AdminKey, err = component.AdminCredentials(pki, d.seal); err != nil {
		log.Warn("kube-apiserver probe runs anonymously", "err", err)
	}
	written, err := writeFiles(in.Dir, files)
	if len(written) > 0 {
		log.Info("wrote control-plane files", "files", written, "pki_serial", pki.Serial)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return d.converge(ctx, log, sup, c, in)
}

func getOptional[T any](ctx context.Context, s *store.Store[T], key string) (*T, error) {
	v, _, err := s.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// converge walks the components in dependency order: each one moves toward its desired
// config only as far as its dependencies allow, then its status is recorded.
func (d *Daemon) converge(ctx context.Context, log *slog.Logger, sup *process.Supervisor, c *api.Cluster, in *component.Inputs) (reconcile.Result, error) {
	prev, err := d.components.List(ctx, c.Name+".*")
	if err != nil {
		return reconcile.Result{}, err
	}
	byName := make(map[string]*store.Entry[api.ControlPlaneComponent], len(prev))
	for i := range prev {
		byName[prev[i].Value.Name] = &prev[i]
	}

	observed := map[string]rollout.Summary{}
	settled := true
	for _, comp := range component.All() {
		clog := log.With("component", comp.Name)
		want, err := comp.Desired(in)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		gate := rollout.Gate{Available: true, Settled: true}
		for _, dep := range comp.DependsOn {
			s := observed[dep]
			gate.Available = gate.Available && s.Available
			gate.Settled = gate.Settled && s.Available && s.Complete
		}
		old := byName[comp.Name]
		reps, err := d.rollOut(ctx, clog, sup, want, old, gate)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		sum, err := d.record(ctx, clog, c.Name, want, old, reps, gate)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s: %w", comp.Name, err)
		}
		observed[comp.Name] = sum
		settled = settled && sum.Available && sum.Complete
	}
	if settled {
		return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, nil
	}
	return reconcile.Result{RequeueAfter: d.cfg.ProgressInterval}, nil
}

// componentKey is the controlplane bucket key of a component.
func componentKey(cluster, comp string) string { return cluster + "." + comp }

// replica is what the reconcile knows of one replica.
type replica struct {
	rollout.Replica
	name       string
	supervised bool
	status     process.Status // of the supervised process; only Pid otherwise
}

// rollOut re-adopts replicas that run the desired config, starts those that run nothing and
// replaces one that runs an older config, as far as gate allows; it returns what runs then.
func (d *Daemon) rollOut(ctx context.Context, log *slog.Logger, sup *process.Supervisor, want component.Desired,
	old *store.Entry[api.ControlPlaneComponent], gate rollout.Gate) ([]replica, error) {
	if err := d.adopt(ctx, log, sup, want, old); err != nil {
		return nil, err
	}
	reps := observe(sup, want, old)
	step := rollout.Next(want.Hash, replicasOf(reps), gate)
	for _, i := range step.Start {
		log.Info("starting replica", "replica", want.Specs[i].Name, "version", want.Version, "config_hash", want.Hash)
		if _, err := sup.Start(ctx, want.Specs[i]); err != nil {
			return nil, err
		}
	}
	if i := step.Replace; i >= 0 {
		log.Info("rolling replica", "replica", want.Specs[i].Name, "from_hash", reps[i].Hash,
			"config_hash", want.Hash, "version", want.Version)
		// Start stops the process running an older spec, then starts this one.
		if _, err := sup.Start(ctx, want.Specs[i]); err != nil {
			return nil, err
		}
	}
	if len(step.Start) > 0 || step.Replace >= 0 {
		reps = observe(sup, want, old)
	}
	return reps, nil
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
		if rs == nil || rs.ConfigHash != want.Hash || !pidAlive(rs.Pid) {
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
		} else if rs := previousReplica(old, spec.Name); rs != nil && pidAlive(rs.Pid) {
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

// pidAlive reports whether pid names a process that has not exited.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}
