// Package inbox consumes inbound events, the events other systems publish on
// hostplane.in.<cluster>.<type> (stream HOSTPLANE_INBOX), for the daemon that owns their types.
//
// A Consumer decodes each message strictly as a CloudEvent, checks that its type is
// io.hostplane.in.<type> of its subject, validates its data against the type's JSON Schema
// (events.ValidateInboundData), refuses an id it already applied (remembered in the owner's
// own KV bucket, so a replay long after JetStream's duplicate window still takes effect once)
// and hands it to the owner's Handler. Whatever is not applied is answered with a Rejection
// on hostplane.evt.<cluster>.inbox.rejected and acknowledged: a bad event never blocks the
// ones behind it and never changes state.
package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Rejection reasons the consumer itself gives (handlers give their own).
const (
	ReasonDuplicate = "duplicate event id"
	// ReasonRateLimited starts the reason of an event past its cluster's rate (Config.Rate).
	ReasonRateLimited = "rate limited"
)

// Defaults of Config.Rate and Config.Burst: what one cluster's senders may ask of one owner.
const (
	DefaultRate  = 20 // events per second
	DefaultBurst = 200
)

// DefaultDedupTTL is how long an applied event id is remembered: as long as HOSTPLANE_INBOX
// keeps messages.
const DefaultDedupTTL = bus.DefaultDedupTTL

// Handler applies one valid inbound event of its type to cluster. It returns nil when the
// event took effect, a *RejectError (Rejectf) when it must not (the event is answered on
// inbox.rejected and never retried), or any other error to have it retried later.
type Handler func(ctx context.Context, cluster string, ev events.Event) error

// RejectError is a handler's refusal of an event, with the reason given to the sender.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return "inbound event rejected: " + e.Reason }

// Rejectf returns a *RejectError with a formatted reason.
func Rejectf(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}

// Rejection is the data of io.hostplane.inbox.rejected.
type Rejection struct {
	ID      string `json:"id"`      // the inbound event's id ("" when the payload was no CloudEvent)
	Type    string `json:"type"`    // the inbound type, the subject's tail ("cluster.upgrade")
	Subject string `json:"subject"` // the NATS subject it arrived on
	Reason  string `json:"reason"`

	// ref names the inbound message for the rejection's own id: the event id or, for a
	// payload without one, its stream sequence.
	ref string
}

// EventID is the id of the inbox.rejected event answering r: "<inbound id>-rejected", also
// its Nats-Msg-Id, so a redelivered inbound event's rejection is stored once.
func (r Rejection) EventID() string {
	ref := r.ref
	if ref == "" {
		ref = r.ID
	}
	return ref + "-rejected"
}

// Config configures a Consumer.
type Config struct {
	// Name is the durable consumer's name, for example "clusterd-inbox".
	Name string
	// Handlers are the owner's inbound types ("cluster.upgrade") and their handlers. Every
	// type must be in events.Inbound.
	Handlers map[string]Handler
	// FrontDesk also consumes every other subject of the stream and answers the types nobody
	// handles: unknown types ("unknown event type <type>") and known types whose owner is not
	// built yet (events.InboundType.Handled false: "no owner handles <type> yet"). Types of
	// other running owners are left to them. Exactly one daemon runs the front desk (clusterd).
	FrontDesk bool
	// Dedup is the owner's bucket for applied event ids (EnsureDedupBucket).
	Dedup jetstream.KeyValue
	// Reject publishes a rejection on hostplane.evt.<cluster>.inbox.rejected (the daemon's
	// RejectionPublisher). An error has the message retried.
	Reject func(ctx context.Context, cluster string, r Rejection) error
	// Registry receives hostplane_inbox_events_total; nil means none.
	Registry prometheus.Registerer
	Log      *slog.Logger
	// AckWait and RetryDelay default to 30s and 2s.
	AckWait, RetryDelay time.Duration
	// Rate and Burst bound the events of one cluster this consumer applies (a token bucket
	// per cluster: Rate per second, Burst at once; defaults DefaultRate, DefaultBurst): an
	// event past them is rejected (ReasonRateLimited), so a tenant flooding its subjects
	// makes the owner do no more work than that, and the other clusters' events go on.
	Rate  rate.Limit
	Burst int
	// TracerProvider, when set, gives each message a consumer span "inbox <Name>" that
	// continues the sender's trace (traceparent in the NATS headers); the handler runs in it,
	// so what it publishes carries the trace on. Nil: no span, the trace still carries on.
	TracerProvider trace.TracerProvider
}

// Consumer is a running inbox consumer; Start runs it (a daemon.Runnable).
type Consumer struct {
	js      jetstream.JetStream
	cfg     Config
	log     *slog.Logger
	outcome *prometheus.CounterVec

	// limits are the clusters' token buckets; only Start's loop touches them.
	limits    map[string]*clusterLimit
	processed int
}

// clusterLimit is one cluster's token bucket and when it was last used.
type clusterLimit struct {
	lim  *rate.Limiter
	last time.Time
}

// limitIdle is how long an unused cluster's bucket is kept (a full one is the same as none).
const limitIdle = 10 * time.Minute

// Outcomes counted by hostplane_inbox_events_total.
const (
	OutcomeApplied  = "applied"
	OutcomeRejected = "rejected"
	OutcomeRetried  = "retried"
	OutcomeIgnored  = "ignored" // another owner's type, seen by the front desk
	OutcomeLimited  = "limited" // past its cluster's rate: rejected (counted as rejected too)
)

// New checks cfg and returns a consumer.
func New(js jetstream.JetStream, cfg Config) (*Consumer, error) {
	if cfg.Name == "" || cfg.Dedup == nil || cfg.Reject == nil {
		return nil, errors.New("inbox: Config.Name, Dedup and Reject are required")
	}
	if len(cfg.Handlers) == 0 && !cfg.FrontDesk {
		return nil, errors.New("inbox: no handlers")
	}
	for typ := range cfg.Handlers {
		if _, ok := events.LookupInbound(typ); !ok {
			return nil, fmt.Errorf("inbox: %w: %q has no schema in events.Inbound", events.ErrUnknownInboundType, typ)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 2 * time.Second
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	outcome, err := observe.Register(cfg.Registry, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_inbox_events_total",
		Help: "Inbound events by type and outcome (applied, rejected, retried, ignored, limited: past its cluster's rate, and rejected).",
	}, []string{"type", "outcome"}))
	if err != nil {
		return nil, err
	}
	return &Consumer{js: js, cfg: cfg, log: cfg.Log.With("consumer", cfg.Name), outcome: outcome, limits: map[string]*clusterLimit{}}, nil
}

// FilterSubjects are the subjects the consumer reads: hostplane.in.*.<type> per handled
// type, or all of hostplane.in.> for the front desk.
func (c *Consumer) FilterSubjects() []string {
	if c.cfg.FrontDesk {
		return []string{events.InboxPrefix + ".>"}
	}
	var out []string
	for typ := range c.cfg.Handlers {
		out = append(out, events.InboxPrefix+".*."+typ)
	}
	slices.Sort(out)
	return out
}

// Start consumes until ctx ends, one message at a time in stream order.
func (c *Consumer) Start(ctx context.Context) error {
	cons, err := c.js.CreateOrUpdateConsumer(ctx, events.InboxStream, jetstream.ConsumerConfig{
		Durable:        c.cfg.Name,
		Description:    "hostplane inbound events for " + c.cfg.Name,
		FilterSubjects: c.FilterSubjects(),
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("inbox %s: consumer: %w", c.cfg.Name, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("inbox %s: consume: %w", c.cfg.Name, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	c.log.Info("inbox consumer started", "filters", c.FilterSubjects())
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				c.log.Info("inbox consumer stopped")
				return nil
			}
			c.log.Warn("inbox: next message", "err", err)
			continue
		}
		c.process(ctx, msg)
	}
}

var idKeyRE = regexp.MustCompile(`^[A-Za-z0-9_=-]{1,128}$`)

// DedupKey is the key an applied event id is remembered under in the owner's bucket:
// inbox.<cluster>.<id> (an id that is not a safe key token is hashed).
func DedupKey(cluster, id string) string {
	if !idKeyRE.MatchString(id) {
		sum := sha256.Sum256([]byte(id))
		id = "sha256-" + hex.EncodeToString(sum[:16])
	}
	return "inbox." + cluster + "." + id
}

// DedupBucket is the name of a daemon's bucket of applied inbound event ids.
func DedupBucket(daemon string) string { return events.DedupBucket(daemon) }

// EnsureDedupBucket opens a daemon's dedup bucket (bus.DedupBucketConfig; the bootstrap
// identity lays it out), or creates it, entries expiring after ttl (DefaultDedupTTL when
// zero), where the caller may (a test's admin).
func EnsureDedupBucket(ctx context.Context, js jetstream.JetStream, daemon string, ttl time.Duration) (jetstream.KeyValue, error) {
	return bus.OpenOrCreateKeyValue(ctx, js, bus.DedupBucketConfig(daemon, ttl, 1))
}

// applied is what the dedup bucket holds per event id.
type applied struct {
	Seq  uint64    `json:"seq"` // stream sequence of the message that applied it
	Type string    `json:"type"`
	At   time.Time `json:"at"`
}

func (c *Consumer) process(ctx context.Context, msg jetstream.Msg) {
	ctx, end := c.startSpan(ctx, msg)
	defer end()
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	cluster, typ, ok := c.route(msg)
	if !ok {
		return
	}
	in := inbound{typ: typ, label: typ, rej: Rejection{Type: typ, Subject: msg.Subject(), ref: "seq-" + strconv.FormatUint(seq, 10)}}
	in.it, in.known = events.LookupInbound(typ)
	if !in.known {
		in.label = "unknown"
	}
	in.handler, in.mine = c.cfg.Handlers[typ]
	if !in.mine {
		switch {
		case !c.cfg.FrontDesk:
			c.ack(msg) // not ours (filters changed under us)
			return
		case in.known && in.it.Handled:
			c.count(in.label, OutcomeIgnored) // its owner's consumer answers it
			c.ack(msg)
			return
		}
	}
	ev := in.decode(msg.Data())
	if in.rej.Reason != "" {
		c.reject(ctx, msg, cluster, in.label, in.rej)
		return
	}
	if in.mine && !c.allow(cluster) {
		c.count(in.label, OutcomeLimited)
		in.rej.Reason = fmt.Sprintf("%s: cluster %s sent more than %v events a second (%d at once) to %s; send it again later",
			ReasonRateLimited, cluster, float64(c.cfg.Rate), c.cfg.Burst, c.cfg.Name)
		c.reject(ctx, msg, cluster, in.label, in.rej)
		return
	}
	log := c.log.With("cluster", cluster, "type", typ, "id", ev.ID)
	key := DedupKey(cluster, ev.ID)
	if c.seen(ctx, msg, cluster, key, seq, &in, log) {
		return
	}
	c.apply(ctx, msg, cluster, key, seq, ev, &in, log)
}

// inbound is one message's way through process: its type, what the consumer knows of it and
// the rejection it gets if it is not applied.
type inbound struct {
	typ, label string
	it         events.InboundType
	known      bool
	handler    Handler
	mine       bool
	rej        Rejection
}

// startSpan starts the consumer span of msg, continuing the publisher's trace.
func (c *Consumer) startSpan(ctx context.Context, msg jetstream.Msg) (context.Context, func()) {
	ctx = observe.ExtractNATS(ctx, msg.Headers())
	if c.cfg.TracerProvider == nil {
		return ctx, func() {}
	}
	ctx, span := c.cfg.TracerProvider.Tracer("github.com/hostplane/hostplane/pkg/inbox").Start(ctx, "inbox "+c.cfg.Name,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", msg.Subject()),
		))
	return ctx, func() { span.End() }
}

// route reads the cluster and type from msg's subject. A subject with no cluster to answer on
// is dropped (acknowledged, nothing published) and route reports false; the front desk takes
// a valid cluster with a type no schema can have, to reject it.
func (c *Consumer) route(msg jetstream.Msg) (cluster, typ string, ok bool) {
	subject := msg.Subject()
	cluster, typ, err := events.ParseInboxSubject(subject)
	if err == nil {
		return cluster, typ, true
	}
	rest, inbox := strings.CutPrefix(subject, events.InboxPrefix+".")
	cl, tail, _ := strings.Cut(rest, ".")
	if _, cerr := events.InboxSubject(cl, "x"); !inbox || cerr != nil || !c.cfg.FrontDesk {
		c.count("unknown", OutcomeRejected)
		c.log.Warn("inbox: dropped a message on a malformed subject", "subject", subject, "err", err)
		c.ack(msg)
		return "", "", false
	}
	return cl, tail, true
}

// decode decodes data as the CloudEvent of in's type and sets in.rej.Reason when it must be
// rejected: an unknown type, one no owner handles, a malformed event, a CloudEvent type that
// does not match the subject, or data its JSON Schema refuses.
func (in *inbound) decode(data []byte) events.Event {
	ev, err := events.Decode(data)
	if err == nil {
		in.rej.ID, in.rej.ref = ev.ID, ev.ID
	}
	switch {
	case !in.known:
		in.rej.Reason = "unknown event type " + in.typ
	case !in.mine:
		in.rej.Reason = "no owner handles " + in.typ + " yet"
	case err != nil:
		in.rej.Reason = "malformed CloudEvent: " + err.Error()
	case ev.Type != in.it.CloudEventType():
		in.rej.Reason = fmt.Sprintf("CloudEvent type %q does not match the subject: want %q", ev.Type, in.it.CloudEventType())
	default:
		if verr := events.ValidateInboundData(in.typ, ev.Data); verr != nil {
			in.rej.Reason = verr.Error()
		}
	}
	return ev
}

// seen answers an event id already applied (remembered under key) and reports true: the very
// message that applied it, redelivered after a lost ack, is acknowledged; any other is
// rejected as a duplicate. It also reports true when the memory cannot be read (retried).
func (c *Consumer) seen(ctx context.Context, msg jetstream.Msg, cluster, key string, seq uint64, in *inbound, log *slog.Logger) bool {
	entry, err := c.cfg.Dedup.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false
	case err != nil:
		c.retry(msg, in.label, log, fmt.Errorf("read %s: %w", key, err))
		return true
	}
	var a applied
	if json.Unmarshal(entry.Value(), &a) == nil && a.Seq == seq && seq != 0 {
		c.ack(msg)
		return true
	}
	in.rej.Reason = ReasonDuplicate
	c.reject(ctx, msg, cluster, in.label, in.rej)
	return true
}

// apply hands ev to its handler and, once it took effect, remembers its id under key.
func (c *Consumer) apply(ctx context.Context, msg jetstream.Msg, cluster, key string, seq uint64, ev events.Event, in *inbound, log *slog.Logger) {
	err := in.handler(ctx, cluster, ev)
	var re *RejectError
	switch {
	case errors.As(err, &re):
		in.rej.Reason = re.Reason
		c.reject(ctx, msg, cluster, in.label, in.rej)
		return
	case err != nil:
		c.retry(msg, in.label, log, err)
		return
	}
	b, _ := json.Marshal(applied{Seq: seq, Type: in.typ, At: time.Now().UTC()})
	// Remember it even when the daemon is stopping: it was applied.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_, err = c.cfg.Dedup.Put(pctx, key, b)
	cancel()
	if err != nil {
		// Applied but not remembered: a replay would apply it again. Log loudly; the
		// handlers are idempotent for the same data.
		log.Error("inbox: remember applied event id", "key", key, "err", err)
	}
	c.count(in.label, OutcomeApplied)
	log.Info("inbound event applied")
	c.ack(msg)
}

// allow takes one token of cluster's bucket, and now and then forgets the buckets of
// clusters idle for limitIdle.
func (c *Consumer) allow(cluster string) bool {
	now := time.Now()
	if c.processed++; c.processed%1000 == 0 {
		for k, l := range c.limits {
			if now.Sub(l.last) > limitIdle {
				delete(c.limits, k)
			}
		}
	}
	l, ok := c.limits[cluster]
	if !ok {
		l = &clusterLimit{lim: rate.NewLimiter(c.cfg.Rate, c.cfg.Burst)}
		c.limits[cluster] = l
	}
	l.last = now
	return l.lim.AllowN(now, 1)
}

func (c *Consumer) reject(ctx context.Context, msg jetstream.Msg, cluster, label string, r Rejection) {
	if err := c.cfg.Reject(ctx, cluster, r); err != nil {
		c.retry(msg, label, c.log.With("cluster", cluster), fmt.Errorf("publish rejection: %w", err))
		return
	}
	c.count(label, OutcomeRejected)
	c.log.Info("inbound event rejected", "cluster", cluster, "type", r.Type, "id", r.ID, "reason", r.Reason)
	c.ack(msg)
}

func (c *Consumer) retry(msg jetstream.Msg, label string, log *slog.Logger, err error) {
	c.count(label, OutcomeRetried)
	log.Warn("inbound event will be retried", "subject", msg.Subject(), "err", err)
	if err := msg.NakWithDelay(c.cfg.RetryDelay); err != nil {
		log.Warn("inbox: nak", "err", err)
	}
}

func (c *Consumer) ack(msg jetstream.Msg) {
	if err := msg.Ack(); err != nil {
		c.log.Warn("inbox: ack", "subject", msg.Subject(), "err", err)
	}
}

func (c *Consumer) count(typ, outcome string) { c.outcome.WithLabelValues(typ, outcome).Inc() }

// RejectionPublisher publishes one daemon's inbox.rejected events. Its Publish has the shape
// of bus.Publisher.Publish, but the event's id (and Nats-Msg-Id) is Rejection.EventID, so the
// rejection of a redelivered inbound event is stored once.
type RejectionPublisher struct {
	js     jetstream.JetStream
	source string
}

// NewRejectionPublisher returns the publisher of daemon's rejections (source /hostplane/<daemon>).
func NewRejectionPublisher(js jetstream.JetStream, daemon string) *RejectionPublisher {
	return &RejectionPublisher{js: js, source: "/hostplane/" + daemon}
}

// Publish publishes data, which must be a Rejection, on hostplane.evt.<cluster>.<resource>.<verb>
// (events.ResourceInbox, events.VerbInboxRejected).
func (p *RejectionPublisher) Publish(ctx context.Context, cluster string, resource events.Resource, verb, key string, data any) (events.Event, error) {
	r, ok := data.(Rejection)
	if !ok {
		return events.Event{}, fmt.Errorf("inbox: publish %T, want a Rejection", data)
	}
	subject, ev, err := events.NewOn(p.source, cluster, resource, verb, key, r)
	if err != nil {
		return events.Event{}, err
	}
	ev.ID = r.EventID()
	_, err = bus.PublishEvent(ctx, p.js, subject, ev)
	return ev, err
}
