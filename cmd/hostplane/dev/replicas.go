package dev

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/leader"
)

// restartDelay is how long a ReplicaSet waits before it starts a stopped replica again, as
// a container's restart policy would.
const restartDelay = time.Second

// LeadingDaemon is a Daemon that says whether it leads (pkg/daemon.Daemon does).
type LeadingDaemon interface {
	Daemon
	Leading() bool
}

// replica is one running process of a daemon, in-process.
type replica struct {
	d        LeadingDaemon
	router   chi.Router
	registry *prometheus.Registry
	stop     context.CancelFunc
}

// ReplicaSet runs replicas of one daemon the way a deployment does: every replica competes
// for the daemon's lease (pkg/leader), the one that holds it works, the front door routes to
// it, and a replica that stops — stopped by StopLeader, or because it lost its lease — is
// started again as a fresh instance after restartDelay.
//
// A set of one replica (hostplane dev's default) restarts only a replica that lost its lease
// (a stall of the whole process, such as a starved machine, outlasted its renewals: the next
// instance takes the lease again once it expires); any other error stops the set, and Run
// returns it, since no standby would cover a replica that cannot start.
type ReplicaSet struct {
	name  string
	build func(i int) (LeadingDaemon, *prometheus.Registry, error)
	log   *slog.Logger

	mu       sync.Mutex
	replicas []*replica
	runCtx   context.Context
	wg       sync.WaitGroup
	// failed delivers the error that stopped a set of one replica.
	failed chan error
}

// newReplicaSet builds n replicas with build (called again for each restart).
func newReplicaSet(n int, log *slog.Logger, build func(i int) (LeadingDaemon, *prometheus.Registry, error)) (*ReplicaSet, error) {
	rs := &ReplicaSet{build: build, log: log, replicas: make([]*replica, n), failed: make(chan error, 1)}
	for i := range n {
		r, err := rs.newReplica(i)
		if err != nil {
			return nil, err
		}
		rs.replicas[i] = r
	}
	rs.name = rs.replicas[0].d.Name()
	return rs, nil
}

func (rs *ReplicaSet) newReplica(i int) (*replica, error) {
	d, reg, err := rs.build(i)
	if err != nil {
		return nil, err
	}
	r := &replica{d: d, registry: reg, router: chi.NewRouter()}
	d.Routes(r.router)
	return r, nil
}

// Name is the daemon's name.
func (rs *ReplicaSet) Name() string { return rs.name }

// Run runs every replica until ctx ends, starting a stopped one again; it returns the error
// that stopped a set of one replica (see ReplicaSet).
func (rs *ReplicaSet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rs.mu.Lock()
	rs.runCtx = ctx
	for i := range rs.replicas {
		rs.start(i)
	}
	rs.mu.Unlock()
	var err error
	select {
	case <-ctx.Done():
	case err = <-rs.failed:
		cancel()
	}
	rs.wg.Wait()
	return err
}

// start runs replica i (rs.mu held) and, when it stops before ctx ends, a fresh one in its
// place.
func (rs *ReplicaSet) start(i int) {
	r := rs.replicas[i]
	rctx, stop := context.WithCancel(rs.runCtx)
	r.stop = stop
	rs.wg.Go(func() {
		err := r.d.Run(rctx)
		stop()
		if rs.runCtx.Err() != nil {
			return
		}
		if len(rs.replicas) == 1 && err != nil && !errors.Is(err, leader.ErrLost) {
			rs.failed <- err
			return
		}
		rs.log.Warn("a replica stopped; starting it again", "daemon", rs.name, "replica", i, "err", err)
		select {
		case <-rs.runCtx.Done():
			return
		case <-time.After(restartDelay):
		}
		fresh, err := rs.newReplica(i)
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if err != nil {
			rs.log.Error("cannot build a replica again", "daemon", rs.name, "replica", i, "err", err)
			return
		}
		if rs.runCtx.Err() == nil {
			rs.replicas[i] = fresh
			rs.start(i)
		}
	})
}

// leader returns the replica that leads, or nil.
func (rs *ReplicaSet) leader() *replica {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.replicas {
		if r.d.Leading() {
			return r
		}
	}
	return nil
}

// handoverWait is how long the front door holds a call while no replica leads (a hand-over
// takes well under a second when the leader stops) before it answers 503.
const handoverWait = 10 * time.Second

// awaitLeader returns the leading replica, waiting up to handoverWait for one.
func (rs *ReplicaSet) awaitLeader(ctx context.Context) *replica {
	deadline := time.Now().Add(handoverWait)
	for {
		if l := rs.leader(); l != nil || time.Now().After(deadline) {
			return l
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StopLeader stops the replica that leads (it gives its lease back as SIGTERM would make it)
// and returns its index; the set starts it again after restartDelay. -1: none leads.
func (rs *ReplicaSet) StopLeader() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, r := range rs.replicas {
		if r.d.Leading() {
			r.stop()
			return i
		}
	}
	return -1
}

// Routes registers the daemon's routes on r, each answered by the replica that leads (503
// while none does).
func (rs *ReplicaSet) Routes(r chi.Router) {
	err := chi.Walk(rs.replicas[0].router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		r.Method(method, route, http.HandlerFunc(rs.serve))
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("dev: walking %s's routes: %v", rs.name, err)) // chi.Walk fails only on a malformed router
	}
}

func (rs *ReplicaSet) serve(w http.ResponseWriter, req *http.Request) {
	l := rs.awaitLeader(req.Context())
	if l == nil {
		httpapi.WriteProblem(w, req, api.Errorf(api.CodeUnavailable, "no %s replica leads yet; retry shortly", rs.name))
		return
	}
	// The leader's router routes the request afresh.
	l.router.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), chi.RouteCtxKey, nil)))
}

// Ready is nil once a replica leads and is ready.
func (rs *ReplicaSet) Ready(ctx context.Context) error {
	l := rs.leader()
	if l == nil {
		return fmt.Errorf("%s: no replica leads", rs.name)
	}
	return l.d.Ready(ctx)
}

// Gather gathers the leading replica's metrics (standbys' series would collide with them).
func (rs *ReplicaSet) Gather() ([]*dto.MetricFamily, error) {
	if l := rs.leader(); l != nil {
		return l.registry.Gather()
	}
	return nil, nil
}

// StopAll stops the control-plane processes of the daemon (componentd), through every
// replica that has them.
func (rs *ReplicaSet) StopAll(ctx context.Context) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	for _, r := range rs.replicas {
		if sa, ok := r.d.(interface{ StopAll(context.Context) error }); ok {
			errs = append(errs, sa.StopAll(ctx))
		}
	}
	return errors.Join(errs...)
}
