package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/leader"
	"github.com/hostplane/hostplane/pkg/leaderendpoint"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Runnable is a long-lived part of a daemon: it runs until ctx ends.
type Runnable interface {
	Start(ctx context.Context) error
}

// RunnableFunc adapts a function to a Runnable.
type RunnableFunc func(ctx context.Context) error

// Start calls f.
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// Runtime is what a daemon has once it is connected.
type Runtime struct {
	Name           string
	Log            *slog.Logger
	Registry       *prometheus.Registry
	TracerProvider trace.TracerProvider
	Conn           *nats.Conn
	JS             jetstream.JetStream
	// Outbox records the daemon's state-change events before the writes they are about;
	// its relay runs with the daemon's other parts (pkg/outbox).
	Outbox       *outbox.Outbox
	DataDir      string // this daemon's own directory: <data dir>/<name>
	buckets      map[string]jetstream.KeyValue
	natsReplicas int // Base.NATSReplicas, for buckets created on demand
}

// Bucket returns a KV bucket: the daemon's own (created at start) or another daemon's
// (opened read-only by convention; it must exist).
func (rt *Runtime) Bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	if kv, ok := rt.buckets[name]; ok {
		return kv, nil
	}
	kv, err := rt.JS.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// The owner has not started yet; create it empty so readers can watch it.
		return bus.EnsureBucketReplicated(ctx, rt.JS, name, rt.natsReplicas)
	}
	return kv, err
}

// ObjectStore opens (creating it when missing, with the deployment's replica count) a
// JetStream object store the daemon owns (pkg/natsauth's table).
func (rt *Runtime) ObjectStore(ctx context.Context, name string) (jetstream.ObjectStore, error) {
	return bus.EnsureObjectStore(ctx, rt.JS, name, rt.natsReplicas)
}

// Controller builds a reconcile controller with the daemon's logger, metrics and tracing.
func (rt *Runtime) Controller(cfg reconcile.Config, r reconcile.Reconciler) (*reconcile.Controller, error) {
	if cfg.Logger == nil {
		cfg.Logger = rt.Log
	}
	if cfg.Registry == nil {
		cfg.Registry = rt.Registry
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = rt.TracerProvider
	}
	return reconcile.New(rt.JS, cfg, r)
}

// Spec declares a daemon to the shared lifecycle.
type Spec struct {
	Name    string
	Buckets []string // the KV buckets this daemon owns, created at start
	// Setup runs once connected and returns the daemon's long-lived parts (controllers,
	// servers, timers). It must not block.
	Setup func(ctx context.Context, rt *Runtime) ([]Runnable, error)
	// Routes registers the daemon's /v1 routes (full paths, {cluster} for the cluster name).
	// A route that needs Setup's work registers through Daemon.Started, so it answers 503
	// until then.
	Routes func(r chi.Router)
	// Ready adds a daemon-specific readiness check (nil: ready once every controller runs).
	Ready func(ctx context.Context) error
	// Stop runs after every Runnable returned, before NATS closes (release files, processes).
	Stop func(ctx context.Context) error
}

// Daemon runs a Spec.
type Daemon struct {
	spec        Spec
	base        Base
	log         *slog.Logger
	registry    *prometheus.Registry
	tp          trace.TracerProvider
	rt          atomic.Pointer[Runtime]
	controllers []*reconcile.Controller
	mu          sync.Mutex
	running     atomic.Bool
	standbyOf   atomic.Pointer[string] // the leader's identity while this replica stands by
	adminAddr   chan string
	auth        *auth.Authenticator // nil: the admin router has no access control
	adminTLS    *tls.Config         // nil: the admin port is plain HTTP
}

// New validates the configuration; Run starts the daemon.
func New(base Base, spec Spec) (*Daemon, error) {
	if spec.Name == "" {
		return nil, errors.New("daemon: Spec.Name is required")
	}
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	a, err := base.authenticator()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	d := &Daemon{spec: spec, base: base, adminAddr: make(chan string, 1), auth: a}
	if base.AdminTLS.Enabled() && base.AdminAddr != "" {
		if d.adminTLS, err = base.AdminTLS.TLSConfig(); err != nil {
			return nil, fmt.Errorf("%s: admin port: %w", spec.Name, err)
		}
	}
	d.log = base.Logger
	if d.log == nil {
		d.log = observe.NewLogger(os.Stderr, base.level())
	}
	d.log = d.log.With("daemon", spec.Name)
	d.registry = base.Registry
	if d.registry == nil {
		d.registry = observe.NewRegistry()
	}
	d.tp = base.TracerProvider
	return d, nil
}

// Embed is New for a service type that embeds *Daemon: it sets *core, svc's embedded field,
// to the new Daemon and returns svc, or New's error.
func Embed[S any](svc S, core **Daemon, base Base, spec Spec) (S, error) {
	d, err := New(base, spec)
	if err != nil {
		var none S
		return none, err
	}
	*core = d
	return svc, nil
}

// Name is the daemon's name.
func (d *Daemon) Name() string { return d.spec.Name }

// Logger is the daemon's logger.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// Runtime returns the connected runtime, or an Unavailable error before Run connected.
func (d *Daemon) Runtime() (*Runtime, error) {
	if rt := d.rt.Load(); rt != nil {
		return rt, nil
	}
	if holder := d.standbyOf.Load(); holder != nil {
		return nil, api.Errorf(api.CodeUnavailable, "this %s replica stands by (%s leads); retry shortly", d.spec.Name, *holder)
	}
	return nil, api.Errorf(api.CodeUnavailable, "%s is starting; retry shortly", d.spec.Name)
}

// Started is the middleware of the routes that need the daemon set up: until Run has set it
// up, and while this replica stands by, they answer Runtime's Unavailable error (503).
func (d *Daemon) Started(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := d.Runtime(); err != nil {
			httpapi.WriteProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Routes registers the daemon's /v1 routes on r, a router that is not the daemon's own (hostplane
// dev's front door): each request gets a span of the daemon's tracer provider, so its trace
// shows which daemon answered.
func (d *Daemon) Routes(r chi.Router) {
	if d.spec.Routes != nil {
		r.Group(func(g chi.Router) {
			g.Use(httpapi.TraceRoutes(d.tracerProvider))
			d.spec.Routes(g)
		})
	}
}

// tracerProvider is the daemon's tracer provider once Run made it (nil before).
func (d *Daemon) tracerProvider() trace.TracerProvider {
	if rt := d.rt.Load(); rt != nil {
		return rt.TracerProvider
	}
	return nil
}

// Ready reports nil once this replica leads (holds the daemon's lease), is connected, every
// controller consumes and the daemon's own check passes: its routes answer. A replica that
// stands by gets ErrStandby, naming the leader. The admin port serves it as /leaderz.
func (d *Daemon) Ready(ctx context.Context) error {
	if holder := d.standbyOf.Load(); holder != nil {
		return fmt.Errorf("%s: %w (%s leads)", d.spec.Name, ErrStandby, *holder)
	}
	if d.rt.Load() == nil || !d.running.Load() {
		return fmt.Errorf("%s: not started", d.spec.Name)
	}
	d.mu.Lock()
	cs := d.controllers
	d.mu.Unlock()
	for _, c := range cs {
		if !c.Started() {
			return fmt.Errorf("%s: a controller is not consuming yet", d.spec.Name)
		}
	}
	if d.spec.Ready != nil {
		if err := d.spec.Ready(ctx); err != nil {
			return fmt.Errorf("%s: %w", d.spec.Name, err)
		}
	}
	return nil
}

// replicaReady is the admin port's /readyz: nil for a healthy replica, one that leads and
// is Ready, or one that stands by (connected and campaigning, ready to take over). So a
// Deployment of two replicas counts both Ready (Available, rolling updates and drains
// proceed), and whoever must reach the leader asks /leaderz (Ready) instead.
func (d *Daemon) replicaReady(ctx context.Context) error {
	if d.standbyOf.Load() != nil {
		return nil
	}
	return d.Ready(ctx)
}

// Leading reports whether this replica holds its daemon's lease and works (its routes
// answer); false while it starts, stands by or stops.
func (d *Daemon) Leading() bool { return d.rt.Load() != nil && d.running.Load() }

// AdminAddr returns the admin server's listen address once it listens ("" when none).
func (d *Daemon) AdminAddr(ctx context.Context) string {
	select {
	case a := <-d.adminAddr:
		d.adminAddr <- a
		return a
	case <-ctx.Done():
		return ""
	}
}

// Run connects, serves its admin port, waits to lead (pkg/leader: one replica of a daemon
// works, the others stand by), sets up and works until ctx ends or the lease is lost, then
// shuts down in order and gives the lease back. It returns an error wrapping leader.ErrLost
// when the lease was lost: the process should exit and start again as a standby.
func (d *Daemon) Run(ctx context.Context) error {
	tp, shutdownTracing, err := d.tracing(ctx)
	if err != nil {
		return err
	}
	defer shutdownTracing()
	nc, js, err := d.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			d.log.Debug("nats drain", "err", err)
		}
	}()
	setupCtx, cancelSetup := context.WithTimeout(ctx, time.Minute)
	defer cancelSetup()
	if err := bus.EnsureStreamsReplicated(setupCtx, js, d.base.NATSReplicas); err != nil {
		return fmt.Errorf("%s: %w", d.spec.Name, err)
	}
	elector, err := d.elector(setupCtx, js)
	if err != nil {
		return fmt.Errorf("%s: %w", d.spec.Name, err)
	}

	// The admin port serves from the start: a standby answers /healthz and /readyz, and
	// /leaderz and the /v1 routes with 503 naming the leader.
	httpCtx, cancelHTTP := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHTTP()
	httpDone := d.serveAdmin(httpCtx, tp)
	stopHTTP := func() {
		cancelHTTP()
		if httpDone == nil {
			return
		}
		select {
		case <-httpDone:
		case <-time.After(10 * time.Second):
		}
	}
	defer stopHTTP()

	if err := elector.Acquire(ctx, func(holder string) { d.standbyOf.Store(&holder) }); err != nil {
		d.log.Info("daemon stopped while standing by")
		return nil
	}
	d.standbyOf.Store(nil)
	lost, release := d.hold(ctx, elector)
	defer release()

	runnables, err := d.setUp(ctx, setupCtx, tp, nc, js)
	if err != nil {
		return err
	}
	return d.work(ctx, runnables, httpDone, lost, stopHTTP)
}

// tracing returns the daemon's tracer provider: the one it was given, or a new one (OTLP
// when configured) with the function that flushes and stops it.
func (d *Daemon) tracing(ctx context.Context) (trace.TracerProvider, func(), error) {
	if d.tp != nil {
		return d.tp, func() {}, nil
	}
	sdk, err := observe.NewTracerProvider(ctx, observe.TracingConfig{ServiceName: "hostplane-" + d.spec.Name, OTLPEndpoint: d.base.OTLPEndpoint})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: tracing: %w", d.spec.Name, err)
	}
	return sdk, func() { _ = sdk.Shutdown(context.WithoutCancel(ctx)) }, nil
}

// connect connects to NATS as the daemon's identity (its NKey and TLS when configured).
func (d *Daemon) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	natsOpts, err := d.base.NATSTLS.Options()
	if err == nil && d.base.NATSNKeyFile != "" {
		natsOpts, err = natsauth.ClientOptions(d.spec.Name, d.base.NATSNKeyFile, d.base.NATSTLS)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", d.spec.Name, err)
	}
	nc, err := bus.Connect(ctx, d.base.NATSURL, "hostplane-"+d.spec.Name, d.log, natsOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", d.spec.Name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%s: jetstream: %w", d.spec.Name, err)
	}
	return nc, js, nil
}

// hold keeps the lease this replica acquired until release, which stops renewing it and
// gives it back (call it once the daemon's own cleanup is done). lost delivers the error
// when a renewal fails for too long.
func (d *Daemon) hold(ctx context.Context, elector *leader.Elector) (lost <-chan error, release func()) {
	holdCtx, stopHolding := context.WithCancel(context.WithoutCancel(ctx))
	lostc := make(chan error, 1)
	held := make(chan struct{})
	go func() {
		defer close(held)
		if err := elector.Hold(holdCtx); err != nil {
			lostc <- err
		}
	}()
	return lostc, func() {
		stopHolding()
		<-held
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := elector.Release(releaseCtx); err != nil {
			d.log.Warn("giving the lease back", "err", err)
		}
	}
}

// setUp makes the leader's runtime (data directory, outbox, buckets; Runtime returns it
// from now on), runs the daemon's Setup and returns what is to run: its runnables, then the outbox relay (which publishes
// what a previous process recorded and did not publish, then everything this one records).
func (d *Daemon) setUp(ctx, setupCtx context.Context, tp trace.TracerProvider, nc *nats.Conn, js jetstream.JetStream) ([]Runnable, error) {
	rt := &Runtime{
		Name: d.spec.Name, Log: d.log, Registry: d.registry, TracerProvider: tp,
		Conn: nc, JS: js,
		DataDir: d.base.DataDir + "/" + d.spec.Name, buckets: map[string]jetstream.KeyValue{},
		natsReplicas: d.base.NATSReplicas,
	}
	if err := os.MkdirAll(rt.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("%s: data dir: %w", d.spec.Name, err)
	}
	var err error
	rt.Outbox, err = outbox.New(setupCtx, js, outbox.Config{
		Daemon: d.spec.Name, Replicas: d.base.NATSReplicas, Logger: d.log, Registry: d.registry, TracerProvider: tp,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.spec.Name, err)
	}
	for _, b := range d.spec.Buckets {
		kv, err := bus.EnsureBucketReplicated(setupCtx, js, b, d.base.NATSReplicas)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.spec.Name, err)
		}
		rt.buckets[b] = kv
	}
	if err := registerBucketFill(d.registry, maps.Clone(rt.buckets)); err != nil {
		return nil, fmt.Errorf("%s: metrics: %w", d.spec.Name, err)
	}
	var runnables []Runnable
	if d.spec.Setup != nil {
		runnables, err = d.spec.Setup(ctx, rt)
		if err != nil {
			return nil, fmt.Errorf("%s: setup: %w", d.spec.Name, err)
		}
	}
	runnables = append(runnables, rt.Outbox)
	if d.base.LeaderService != "" {
		ns, svc, _ := d.base.leaderService()
		p, err := leaderendpoint.New(leaderendpoint.Config{Kubeconfig: d.base.ManagementKubeconfig, Namespace: ns, Service: svc,
			Address: d.base.PodIP, Owner: d.spec.Name, Log: d.log})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.spec.Name, err)
		}
		runnables = append(runnables, p)
	}
	d.mu.Lock()
	for _, r := range runnables {
		if c, ok := r.(*reconcile.Controller); ok {
			d.controllers = append(d.controllers, c)
		}
	}
	d.mu.Unlock()
	d.rt.Store(rt)
	return runnables, nil
}

// work starts the runnables and works until ctx ends, a runnable or the admin server fails,
// or the lease is lost; then it shuts down in order: consumers and workers, then HTTP
// (stopHTTP), then the daemon's own cleanup. The caller gives the lease back after it, then
// stops tracing and closes NATS last.
func (d *Daemon) work(ctx context.Context, runnables []Runnable, httpDone chan error, lost <-chan error, stopHTTP func()) error {
	// Runnables (controllers first in the slice) stop when workCtx ends.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	errs := make(chan error, len(runnables)+1)
	var wg sync.WaitGroup
	for _, r := range runnables {
		wg.Go(func() {
			if err := r.Start(workCtx); err != nil {
				errs <- err
			}
		})
	}
	d.running.Store(true)
	d.log.Info("daemon started", "nats", d.base.NATSURL, "admin", d.base.AdminAddr, "replica", d.base.ReplicaID)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		d.log.Error("a part of the daemon failed; shutting down", "err", runErr)
	case err := <-httpDone:
		if err != nil {
			runErr = fmt.Errorf("%s: admin server: %w", d.spec.Name, err)
		}
	case err := <-lost:
		runErr = fmt.Errorf("%s: %w", d.spec.Name, err)
	}
	d.running.Store(false)

	stopWork()
	wg.Wait()
	stopHTTP()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if d.spec.Stop != nil {
		if err := d.spec.Stop(stopCtx); err != nil {
			d.log.Warn("stop", "err", err)
		}
	}
	d.log.Info("daemon stopped")
	return runErr
}

// elector opens the lease bucket (creating it where no bootstrap step did, as in tests
// without NATS permissions) and returns this replica's elector for the daemon's lease.
func (d *Daemon) elector(ctx context.Context, js jetstream.JetStream) (*leader.Elector, error) {
	kv, err := js.KeyValue(ctx, bus.BucketLeases)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = bus.EnsureLeaseBucket(ctx, js, d.base.NATSReplicas)
	}
	if err != nil {
		return nil, fmt.Errorf("lease bucket: %w", err)
	}
	m, err := d.leaderMetrics()
	if err != nil {
		return nil, fmt.Errorf("leader metrics: %w", err)
	}
	return leader.New(leader.Config{
		KV: kv, Name: d.spec.Name, Identity: d.base.ReplicaID, TTL: bus.LeaseTTL, Log: d.log,
		OnChange: func(leading bool) {
			m.leading.Set(map[bool]float64{true: 1, false: 0}[leading])
			if leading {
				m.acquired.Inc()
			}
		},
	})
}

// serveAdmin starts the admin server, until ctx ends, when the daemon has an address; the
// channel delivers its end (nil without one).
func (d *Daemon) serveAdmin(ctx context.Context, tp trace.TracerProvider) chan error {
	if d.base.AdminAddr == "" {
		return nil
	}
	hcfg := httpapi.Config{Name: d.spec.Name, Logger: d.log, Registry: d.registry, Ready: d.replicaReady, Leads: d.Ready, TracerProvider: tp,
		OpenAPI: api.OpenAPI()}
	if d.adminTLS != nil {
		// Who may call comes first: a call that bypasses the gateway is refused before its
		// token is looked at.
		hcfg.Middlewares = append(hcfg.Middlewares, d.base.AdminTLS.Middleware)
	}
	if d.auth != nil {
		hcfg.Middlewares = append(hcfg.Middlewares, d.auth.Middleware)
	} else {
		d.log.Warn("the admin API has no access control: anyone who reaches it may change every cluster", "addr", d.base.AdminAddr)
	}
	router := httpapi.NewRouter(hcfg)
	if d.spec.Routes != nil {
		d.spec.Routes(router) // the router's own spans are the daemon's
	}
	srv := httpapi.NewServer(d.base.AdminAddr, router, d.log)
	srv.TLSConfig = d.adminTLS
	// The server's error is received once; the channel is closed after it, so that every
	// later receive (stopHTTP runs in work and again as Run returns) returns at once.
	httpDone := make(chan error, 1)
	go func() {
		httpDone <- srv.Start(ctx)
		close(httpDone)
	}()
	go func() {
		if a := srv.Addr(); a != "" {
			d.adminAddr <- a
		}
	}()
	return httpDone
}

// Open returns a bucket (the daemon's own, or another daemon's to read) as a typed store.
func Open[T any](ctx context.Context, rt *Runtime, bucket string) (*store.Store[T], error) {
	kv, err := rt.Bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return store.New[T](kv), nil
}

// Stores are the control-plane buckets as typed stores. Every daemon may read them all; each
// writes only its own (clusterd clusters, infrad infra, pkid pki, componentd components).
type Stores struct {
	Clusters   *store.Store[api.Cluster]
	Infra      *store.Store[api.Infra]
	PKI        *store.Store[api.ClusterPKI]
	Components *store.Store[api.ControlPlaneComponent]
}

// OpenStores opens the control-plane buckets the daemon owns or reads according to
// pkg/natsauth's table (all of them for a daemon not in it); the others stay nil, so a
// daemon that does not read the pki bucket never opens it.
func OpenStores(ctx context.Context, rt *Runtime) (Stores, error) {
	var s Stores
	err := errors.Join(
		openIf(ctx, rt, bus.BucketClusters, &s.Clusters),
		openIf(ctx, rt, bus.BucketInfra, &s.Infra),
		openIf(ctx, rt, bus.BucketPKI, &s.PKI),
		openIf(ctx, rt, bus.BucketControlPlane, &s.Components),
	)
	return s, err
}

// openIf opens bucket into *st when the daemon's entry in the natsauth table allows it.
func openIf[T any](ctx context.Context, rt *Runtime, bucket string, st **store.Store[T]) error {
	if d, ok := natsauth.LookupDaemon(rt.Name); ok && !d.MayOpen(bucket) {
		return nil
	}
	var err error
	*st, err = Open[T](ctx, rt, bucket)
	return err
}
