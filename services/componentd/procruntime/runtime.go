package procruntime

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// Config is what a Runtime needs.
type Config struct {
	// Dir is componentd's own directory: the supervisor's pidfiles go in Dir/run, each
	// cluster's files in Dir/clusters/<cluster>.
	Dir string
	// Log is the runtime's logger; the supervisor logs with "runtime"="process" added.
	Log *slog.Logger
	// Enqueue asks for a cluster's reconcile now: called once a replica the runtime started
	// is ready. Optional.
	Enqueue func(cluster string)
	// Restarted counts n more restarts of a replica of the cluster's component (the restarts
	// metric). Optional.
	Restarted func(cluster, component string, n int)
}

// Recorder records the components' state; componentd implements it, so every runtime's
// records look the same.
type Recorder interface {
	// Records returns the cluster's component records by component name.
	Records(ctx context.Context, cluster string) (map[string]*store.Entry[api.ControlPlaneComponent], error)
	// Record stores the component's record computed from o (old is its record now, or nil).
	Record(ctx context.Context, log *slog.Logger, cluster string, old *store.Entry[api.ControlPlaneComponent], o component.Observation) error
	// ReleaseNotBuilt records a component whose release has no binaries on this host yet:
	// whatever runs keeps running. The summary gates the components that depend on it.
	ReleaseNotBuilt(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
		in *component.Inputs, old *store.Entry[api.ControlPlaneComponent]) (rollout.Summary, error)
	// CannotRun records a component this host cannot run as configured (msg says why):
	// whatever runs keeps running.
	CannotRun(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
		in *component.Inputs, old *store.Entry[api.ControlPlaneComponent], msg string) (rollout.Summary, error)
}

// Runtime runs the control-plane components as child processes under one process
// supervisor. It is a Runnable: Start owns the goroutines that wait for started replicas to
// be ready.
type Runtime struct {
	cfg Config
	log *slog.Logger

	supMu     sync.Mutex
	sup       *process.Supervisor
	supClosed bool

	restartsMu sync.Mutex
	restarts   map[string]int // process name → restarts already counted in the metric

	ready readyNotifier // re-enqueues a cluster as soon as a started replica is ready

	drainMu  sync.Mutex
	draining map[string]time.Time // "<replica>/<target hash>" → when its drain began
}

// New returns a Runtime; it starts nothing and opens no supervisor (Open does).
func New(cfg Config) *Runtime {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, log: cfg.Log, restarts: map[string]int{}}
	r.ready.enqueue = func(cluster string) {
		if cfg.Enqueue != nil {
			cfg.Enqueue(cluster)
		}
	}
	return r
}

// RunDir is the process supervisor's state directory (pidfiles).
func (r *Runtime) RunDir() string { return filepath.Join(r.cfg.Dir, "run") }

// ClusterDir is where a cluster's certificates, kubeconfigs, etcd data and logs live.
func (r *Runtime) ClusterDir(cluster string) string {
	return filepath.Join(r.cfg.Dir, "clusters", cluster)
}

// Open starts the process supervisor on RunDir; it finds the processes an earlier
// supervisor left running there by their pidfiles.
func (r *Runtime) Open() error {
	sup, err := process.NewSupervisor(r.RunDir(), r.log.With("runtime", "process"))
	if err != nil {
		return err
	}
	r.supMu.Lock()
	r.sup, r.supClosed = sup, false
	r.supMu.Unlock()
	r.ready.reset()
	return nil
}

// Close stops watching the processes and leaves them running, so the next componentd
// re-adopts them. Afterwards the runtime answers ErrStopped.
func (r *Runtime) Close() error {
	r.supMu.Lock()
	sup, closed := r.sup, r.supClosed
	r.supClosed = true
	r.supMu.Unlock()
	if sup == nil || closed {
		return nil
	}
	return sup.Close()
}

// Start runs until ctx ends, then waits for every goroutine waiting for a replica to be ready.
func (r *Runtime) Start(ctx context.Context) error { return r.ready.Start(ctx) }

// supervisor returns the process supervisor, or ErrStopped when it is closed or not open.
func (r *Runtime) supervisor() (*process.Supervisor, error) {
	r.supMu.Lock()
	defer r.supMu.Unlock()
	if r.sup == nil || r.supClosed {
		return nil, ErrStopped
	}
	return r.sup, nil
}

// Running returns ErrStopped when the runtime can start no process (closed or not open).
func (r *Runtime) Running() error {
	_, err := r.supervisor()
	return err
}

// StopAll stops every control-plane process this runtime (or an earlier one on the same
// directory) started, dependents first. Without an open supervisor it opens one of its own
// for the pidfiles, and closes it after.
func (r *Runtime) StopAll(ctx context.Context) error {
	sup, err := r.supervisor()
	if errors.Is(err, ErrStopped) {
		// Run has returned (or never ran): a supervisor of our own finds the pidfiles.
		if sup, err = process.NewSupervisor(r.RunDir(), r.log); err != nil {
			return err
		}
		defer func() { _ = sup.Close() }()
	}
	names := map[string]bool{}
	for _, st := range sup.List() {
		names[st.Name] = true
	}
	entries, err := os.ReadDir(r.RunDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".pid"); ok && !strings.HasPrefix(n, ".") {
			names[n] = true
		}
	}
	// Dependents first, as a deletion does: a kube-apiserver whose etcd went first does not
	// stop on SIGTERM and is killed after its grace period.
	var all []error
	stopped := 0
	for _, batch := range shutdownBatches(names) {
		errs := make(chan error, len(batch))
		var wg sync.WaitGroup
		for _, n := range batch {
			wg.Go(func() { errs <- sup.Terminate(ctx, n) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			all = append(all, err)
		}
		stopped += len(batch)
	}
	r.log.Info("stopped every control-plane process", "processes", stopped)
	return errors.Join(all...)
}
