// Package componentd is hostplane's componentd daemon: control-plane component rollout through a runtime (process or kubernetes).
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/componentd runs.
package componentd

import (
	"context"
	"flag"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Name is the daemon's name.
const Name = "componentd"

// Config is componentd's configuration.
type Config struct {
	daemon.Base
}

// RegisterFlags adds componentd's own flags to fs and returns the constructor daemon.Main calls.
func RegisterFlags(fs *flag.FlagSet) func(daemon.Base) (daemon.Runner, error) {
	return func(base daemon.Base) (daemon.Runner, error) { return New(Config{Base: base}) }
}

// Daemon is a running componentd.
type Daemon struct {
	*daemon.Daemon
	cfg   Config
	store *store.Store[struct{}]
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	d := &Daemon{cfg: cfg}
	core, err := daemon.New(cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketControlPlane},
		Setup:   d.setup,
		Routes:  d.routes,
	})
	if err != nil {
		return nil, err
	}
	d.Daemon = core
	return d, nil
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	kv, err := rt.Bucket(ctx, bus.BucketControlPlane)
	if err != nil {
		return nil, err
	}
	d.store = store.New[struct{}](kv)
	c, err := rt.Controller(reconcile.Config{
		Name:           Name,
		FilterSubjects: []string{events.ClusterFilter(events.ResourceCluster), events.ClusterFilter(events.ResourcePKI), events.ClusterFilter(events.ResourceInfra)},
		ListKeys:       func(ctx context.Context) ([]string, error) { return d.store.Keys(ctx) },
	}, reconcile.Func(d.reconcile))
	if err != nil {
		return nil, err
	}
	return []daemon.Runnable{c}, nil
}

func (d *Daemon) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

func (d *Daemon) routes(r chi.Router) {}

var _ = events.ClusterFilter
