package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/client-go/util/workqueue"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Result tells the controller what to do after a successful reconcile.
type Result struct {
	// RequeueAfter > 0 reconciles the key again after that long (for timers: expiry,
	// probes, rotations).
	RequeueAfter time.Duration
}

// Reconciler converges the state named by key. It must be idempotent.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (Result, error)
}

// Func adapts a function to a Reconciler.
type Func func(ctx context.Context, key string) (Result, error)

// Reconcile calls f.
func (f Func) Reconcile(ctx context.Context, key string) (Result, error) { return f(ctx, key) }

// KeyFunc maps one event to the keys it concerns. An error rejects the message as malformed.
type KeyFunc func(subject string, ev events.Event) ([]string, error)

// ClusterKey is the default KeyFunc: the cluster token of a hostplane.evt subject.
func ClusterKey(subject string, _ events.Event) ([]string, error) {
	s, err := events.ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	return []string{s.Cluster}, nil
}

// Config configures a Controller.
type Config struct {
	Name           string   // controller name: metrics label, durable consumer name, span names
	Stream         string   // default events.EventsStream
	Durable        string   // default Name
	FilterSubjects []string // the subjects this controller reacts to; required
	Keys           KeyFunc  // default ClusterKey
	Workers        int      // default 4
	// ListKeys returns every key the daemon owns; called at start and every Resync.
	ListKeys func(ctx context.Context) ([]string, error)
	Resync   time.Duration // default 5m; negative disables
	// Backoff after a failed reconcile: BaseBackoff doubling per consecutive failure, up to
	// MaxBackoff. Defaults 100ms and 2m.
	BaseBackoff, MaxBackoff time.Duration
	// AckWait: a message neither acknowledged nor released (the daemon crashed) is
	// redelivered after this long. Default 30s; a redelivery of a message still waiting for
	// its key is merged, so a long retry loop costs nothing.
	AckWait        time.Duration
	Registry       prometheus.Registerer
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
}

func (c *Config) defaults() error {
	if c.Name == "" {
		return errors.New("reconcile: Config.Name is required")
	}
	if len(c.FilterSubjects) == 0 {
		return errors.New("reconcile: Config.FilterSubjects is required")
	}
	if c.Stream == "" {
		c.Stream = events.EventsStream
	}
	if c.Durable == "" {
		c.Durable = c.Name
	}
	if c.Keys == nil {
		c.Keys = ClusterKey
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Resync == 0 {
		c.Resync = 5 * time.Minute
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 2 * time.Minute
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	return nil
}

// pending is a message waiting for a successful reconcile of its key, or (msg nil) a trace
// context EnqueueContext asked the key's next reconcile to continue.
type pending struct {
	msg jetstream.Msg
	seq uint64          // stream sequence: a redelivered message has the same one
	ctx context.Context // carries the publisher's trace context
}

func addPending(list []pending, p pending) []pending {
	for i, old := range list {
		if p.seq != 0 && old.seq == p.seq {
			list[i] = p
			return list
		}
		if p.msg == nil && old.msg == nil {
			// One trace context without a message is enough: keep the latest, last.
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	return append(list, p)
}

// followFor is how long runs of a key that no event triggered (RequeueAfter, a retry, a
// resync, Enqueue) keep continuing the trace of the run before them. Past it they start a
// trace of their own, linked to the earlier one, so a key's steady-state timer does not grow
// one trace forever.
const followFor = 5 * time.Minute

// follow is the trace a key's next run continues when no event triggers it.
type follow struct {
	sc    trace.SpanContext // the span of the run that asked for (or led to) the next one
	since time.Time         // when the chain began: the triggering event's reconcile
}

// Values of the hostplane.trigger span attribute of a reconcile span.
const (
	triggerEvent  = "event"  // one or more events (or EnqueueContext calls)
	triggerFollow = "follow" // no event: continues the previous run's trace (requeue, retry)
	triggerOther  = "other"  // no event and nothing recent to continue: resync, Enqueue, timer
)

// Controller feeds a keyed work queue from a durable JetStream consumer and runs workers.
//
// The queue (client-go's workqueue) gives the package its per-key guarantees: a key waits at
// most once, a key being processed is not handed out again until Done (an Add meanwhile
// re-queues it then), and of two AddAfter calls for one key the earlier deadline wins.
type Controller struct {
	cfg     Config
	js      jetstream.JetStream
	r       Reconciler
	q       workqueue.TypedRateLimitingInterface[string]
	limiter workqueue.TypedRateLimiter[string] // failures per key, for the retry backoff
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *metrics
	started atomic.Bool

	mu      sync.Mutex
	pending map[string][]pending
	follows map[string]follow
}

// New returns a controller; Start runs it.
func New(js jetstream.JetStream, cfg Config, r Reconciler) (*Controller, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	// BaseBackoff doubling per consecutive failure of a key, up to MaxBackoff; Forget resets.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.BaseBackoff, cfg.MaxBackoff)
	c := &Controller{
		cfg:     cfg,
		js:      js,
		r:       r,
		q:       workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name}),
		limiter: limiter,
		log:     cfg.Logger.With("controller", cfg.Name),
		tracer:  cfg.TracerProvider.Tracer("github.com/hostplane/hostplane/pkg/reconcile"),
		pending: map[string][]pending{},
		follows: map[string]follow{},
	}
	m, err := newMetrics(cfg, c.q.Len, js)
	if err != nil {
		c.q.ShutDown()
		return nil, err
	}
	c.metrics = m
	return c, nil
}

// Enqueue asks for key to be reconciled (for triggers that are not events).
func (c *Controller) Enqueue(key string) { c.q.Add(key) }

// EnqueueContext is Enqueue for a trigger that has a trace: an HTTP handler that changed the
// key's state, say. The key's next reconcile span is a child of ctx's span (or, when events
// arrived after it, linked to it), so the request's trace shows the reconcile it caused.
func (c *Controller) EnqueueContext(ctx context.Context, key string) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		c.mu.Lock()
		c.pending[key] = addPending(c.pending[key], pending{ctx: context.WithoutCancel(ctx)})
		c.mu.Unlock()
	}
	c.q.Add(key)
}

// EnqueueAfter asks for key to be reconciled after d. When the key is already due to be
// added later, the earlier of the two times wins.
func (c *Controller) EnqueueAfter(key string, d time.Duration) { c.q.AddAfter(key, d) }

// Started reports whether the consumer is attached and workers run (for readiness).
func (c *Controller) Started() bool { return c.started.Load() }

// Start creates or attaches to the durable consumer, runs the workers and blocks until ctx
// ends; then it stops consuming, lets in-flight reconciles finish (they see ctx cancelled) and
// returns. Unacknowledged messages are redelivered to the next run.
func (c *Controller) Start(ctx context.Context) error {
	// The workqueue runs a goroutine for delayed keys until it is shut down, also when Start
	// fails early. ShutDown may be called more than once.
	defer c.q.ShutDown()
	cons, err := c.js.CreateOrUpdateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable:        c.cfg.Durable,
		Description:    "hostplane reconcile queue of " + c.cfg.Name,
		FilterSubjects: c.cfg.FilterSubjects,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		MaxAckPending:  100_000,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("reconcile %s: consumer: %w", c.cfg.Name, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { c.receive(ctx, msg) })
	if err != nil {
		return fmt.Errorf("reconcile %s: consume: %w", c.cfg.Name, err)
	}

	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Go(func() {
		c.resyncLoop(ctx)
	})
	c.started.Store(true)
	c.log.Info("reconcile controller started", "stream", c.cfg.Stream, "durable", c.cfg.Durable, "filters", c.cfg.FilterSubjects, "workers", c.cfg.Workers)

	<-ctx.Done()
	c.started.Store(false)
	cc.Stop()
	c.q.ShutDown()
	wg.Wait()
	c.releasePending()
	c.log.Info("reconcile controller stopped")
	return nil
}

// receive maps one message to keys and enqueues them; a malformed message is terminated.
func (c *Controller) receive(ctx context.Context, msg jetstream.Msg) {
	// Counted once handled, so a count of n means n messages are rejected, acknowledged or
	// waiting in the queue (a test that waits for the count relies on it).
	defer c.metrics.received.Inc()
	ev, err := events.Decode(msg.Data())
	if err != nil {
		c.reject(msg, "envelope", err)
		return
	}
	keys, err := c.cfg.Keys(msg.Subject(), ev)
	if err != nil {
		c.reject(msg, "subject", err)
		return
	}
	if len(keys) == 0 { // nothing to do for this event
		c.ack(msg)
		return
	}
	p := pending{msg: msg, ctx: observe.ExtractNATS(ctx, msg.Headers())}
	if md, err := msg.Metadata(); err == nil {
		p.seq = md.Sequence.Stream
	}
	c.mu.Lock()
	// The message is acknowledged after the first of its keys reconciles successfully;
	// the other keys are enqueued alongside. A redelivery replaces the earlier delivery.
	c.pending[keys[0]] = addPending(c.pending[keys[0]], p)
	c.mu.Unlock()
	for _, k := range keys {
		c.q.Add(k)
	}
}

// releasePending negatively acknowledges every message still waiting for its key, so the
// next run of the durable consumer (this daemon restarted, or another replica) gets them at
// once instead of after AckWait.
func (c *Controller) releasePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, list := range c.pending {
		for _, p := range list {
			if p.msg != nil {
				_ = p.msg.Nak()
			}
		}
		delete(c.pending, key)
	}
}

func (c *Controller) reject(msg jetstream.Msg, reason string, err error) {
	c.metrics.rejected.WithLabelValues(reason).Inc()
	c.log.Warn("rejected malformed message", "subject", msg.Subject(), "reason", reason, "err", err)
	if err := msg.Term(); err != nil {
		c.log.Warn("terminate message", "subject", msg.Subject(), "err", err)
	}
}

func (c *Controller) ack(msg jetstream.Msg) {
	if err := msg.Ack(); err != nil {
		c.log.Warn("ack message", "subject", msg.Subject(), "err", err)
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.q.Get()
	if shutdown {
		return false
	}
	defer c.q.Done(key)
	if ctx.Err() != nil {
		// The workqueue hands out what is still queued after ShutDown; a stopping
		// controller starts no new reconcile (releasePending gives the messages back).
		return false
	}

	c.mu.Lock()
	msgs := c.pending[key]
	delete(c.pending, key)
	prev, hasPrev := c.follows[key]
	c.mu.Unlock()

	parent, since, opts := c.spanStart(ctx, key, msgs, prev, hasPrev)
	sctx, span := c.tracer.Start(parent, "reconcile "+c.cfg.Name, opts...)
	start := time.Now()
	res, err := c.safeReconcile(sctx, key)
	elapsed := time.Since(start).Seconds()

	// A run that leads to another (a retry, a requeue) hands its trace to that run.
	c.mu.Lock()
	if err != nil || res.RequeueAfter > 0 {
		c.follows[key] = follow{sc: span.SpanContext(), since: since}
	} else {
		delete(c.follows, key)
	}
	c.mu.Unlock()

	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		c.metrics.observe("error", elapsed)
		c.mu.Lock()
		for _, p := range c.pending[key] {
			msgs = addPending(msgs, p)
		}
		c.pending[key] = msgs
		c.mu.Unlock()
		delay := c.limiter.When(key) // what AddRateLimited does, with the delay kept for the log
		if ctx.Err() == nil {
			c.log.WarnContext(sctx, "reconcile failed; retrying", "key", key, "attempt", c.limiter.NumRequeues(key), "retry_in", delay, "err", err)
		}
		c.q.AddAfter(key, delay)
		return true
	}
	span.End()
	result := "success"
	if res.RequeueAfter > 0 {
		result = "requeue"
		c.q.AddAfter(key, res.RequeueAfter)
	}
	c.metrics.observe(result, elapsed)
	c.q.Forget(key)
	for _, p := range msgs {
		if p.msg != nil {
			c.ack(p.msg)
		}
	}
	return true
}

// spanStart decides where a key's reconcile span goes. Runs coalesce every event that arrived
// for the key since the last successful run, so the span is a child of the most recent
// trigger's trace and links to the others. A run no event triggered continues the trace of
// the run before it (a requeue, a retry) for followFor, and otherwise starts a trace of its
// own linked to that run. since is when the chain the span belongs to began.
func (c *Controller) spanStart(ctx context.Context, key string, triggers []pending, prev follow, hasPrev bool) (parent context.Context, since time.Time, opts []trace.SpanStartOption) {
	now := time.Now()
	parent, since = ctx, now
	trigger := triggerOther
	var parentSC trace.SpanContext
	events := 0
	for _, p := range triggers {
		if p.msg != nil {
			events++
		}
	}
	switch {
	case len(triggers) > 0:
		parent = triggers[len(triggers)-1].ctx
		parentSC = trace.SpanContextFromContext(parent)
		trigger = triggerEvent
	case hasPrev && prev.sc.IsValid() && now.Sub(prev.since) < followFor:
		parent = trace.ContextWithSpanContext(ctx, prev.sc)
		parentSC, since = prev.sc, prev.since
		trigger = triggerFollow
	}
	var links []trace.Link
	seen := map[trace.SpanID]bool{parentSC.SpanID(): true}
	for _, p := range triggers {
		if sc := trace.SpanContextFromContext(p.ctx); sc.IsValid() && !seen[sc.SpanID()] {
			seen[sc.SpanID()] = true
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	if hasPrev && prev.sc.IsValid() && !seen[prev.sc.SpanID()] {
		links = append(links, trace.Link{SpanContext: prev.sc, Attributes: []attribute.KeyValue{
			attribute.String("hostplane.link", "previous run")}})
	}
	opts = []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("hostplane.controller", c.cfg.Name),
			attribute.String("hostplane.key", key),
			attribute.Int("hostplane.events", events),
			attribute.String("hostplane.trigger", trigger),
		),
	}
	return parent, since, opts
}

func (c *Controller) safeReconcile(ctx context.Context, key string) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("reconcile panicked", "key", key, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("reconcile %s panicked: %v", key, p)
		}
	}()
	return c.r.Reconcile(ctx, key)
}

func (c *Controller) resyncLoop(ctx context.Context) {
	if c.cfg.ListKeys == nil || c.cfg.Resync < 0 {
		return
	}
	t := time.NewTicker(c.cfg.Resync)
	defer t.Stop()
	for {
		keys, err := c.cfg.ListKeys(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("resync: list keys", "err", err)
		}
		for _, k := range keys {
			c.q.Add(k)
		}
		c.metrics.resyncs.Inc()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
