package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Names of an outbox in JetStream.
const (
	// SubjectPrefix prefixes each daemon's outbox subject: hostplane.outbox.<daemon>.
	SubjectPrefix = events.OutboxPrefix
	// StreamPrefix prefixes each daemon's outbox stream: HOSTPLANE_OUTBOX_<DAEMON>.
	StreamPrefix = events.OutboxStreamPrefix
	// Consumer is the durable consumer every relay of a daemon shares.
	Consumer = events.OutboxConsumer
	// HeaderSubject is the entry header naming the subject the event is published to.
	HeaderSubject = "Hostplane-Subject"
)

// DefaultSettle is how long the relay leaves a fresh entry to its writer (see Config.Settle).
const DefaultSettle = 5 * time.Second

// DefaultAckWait is how long an entry a relay took stays its own without news before
// another relay gets it.
const DefaultAckWait = 30 * time.Second

// DefaultBackoff paces the retries of a failed publish: 100ms doubling to 5s, jittered.
var DefaultBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 10, Cap: 5 * time.Second}

// Config configures a daemon's outbox.
type Config struct {
	// Daemon owns the outbox (required): it names the stream and the events' source,
	// /hostplane/<daemon>.
	Daemon string
	// Replicas is how many copies JetStream keeps of the stream (HOSTPLANE_NATS_REPLICAS;
	// 0 means 1).
	Replicas int
	// Logger, Registry and TracerProvider are the daemon's (nil: discard, an unregistered
	// registry, the tracer provider of the span that recorded each event).
	Logger         *slog.Logger
	Registry       prometheus.Registerer
	TracerProvider trace.TracerProvider
	// Settle is how long after an entry was recorded the relay waits before it publishes
	// it (default DefaultSettle): the writer publishes it itself (Send) once its write
	// succeeded, and the relay's publish is then a duplicate JetStream drops. Waiting keeps
	// the relay from announcing a write that is not stored yet. An entry delivered again
	// (its relay died) or older than Settle goes out at once.
	Settle time.Duration
	// AckWait is how long a relay holds an entry before another relay may take it
	// (default DefaultAckWait). It must exceed Settle and Backoff.Cap: a relay retrying a
	// publish renews its hold on every attempt.
	AckWait time.Duration
	// Backoff paces the retries of a failed publish (zero value: DefaultBackoff).
	Backoff wait.Backoff
}

var daemonRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

func (c *Config) validate() error {
	if !daemonRE.MatchString(c.Daemon) {
		return fmt.Errorf("%w: daemon %q must be a short lower-case name", ErrConfig, c.Daemon)
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.Backoff == (wait.Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.Settle < 0 || c.Backoff.Duration <= 0 || c.AckWait <= max(c.Backoff.Cap, c.Backoff.Duration, c.Settle) {
		return fmt.Errorf("%w: AckWait %v must exceed Settle %v and the backoff's cap %v", ErrConfig, c.AckWait, c.Settle, c.Backoff.Cap)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}

// StreamName is daemon's outbox stream.
func StreamName(daemon string) string { return events.OutboxStream(daemon) }

// Subject is the subject daemon records its events on.
func Subject(daemon string) string { return events.OutboxSubject(daemon) }

// StreamConfig is the configuration of daemon's outbox stream (bus.OutboxStreamConfig).
func StreamConfig(daemon string, replicas int) jetstream.StreamConfig {
	return bus.OutboxStreamConfig(daemon, replicas)
}

// Outbox records one daemon's events (Record) and relays them to HOSTPLANE_EVENTS (Start).
// It is safe for concurrent use.
type Outbox struct {
	js      jetstream.JetStream
	cfg     Config
	source  string
	stream  string
	subject string
	log     *slog.Logger
	m       *metrics

	// afterPublish, set by tests, runs between an entry's publish and its acknowledgement.
	afterPublish func()
}

// New opens the daemon's outbox stream (the bootstrap identity lays it out: a daemon may not
// create or change it, so it cannot make it republish elsewhere; an identity that may, such as
// a test's admin, creates it when missing) and creates its relay consumer.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Outbox, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registry, cfg.Daemon)
	if err != nil {
		return nil, err
	}
	o := &Outbox{
		js: js, cfg: cfg, source: "/hostplane/" + cfg.Daemon, stream: StreamName(cfg.Daemon),
		subject: Subject(cfg.Daemon), log: cfg.Logger.With("outbox", cfg.Daemon), m: m,
	}
	if _, err := bus.OpenOrCreateStream(ctx, js, StreamConfig(cfg.Daemon, cfg.Replicas)); err != nil {
		return nil, err
	}
	if _, err := o.consumer(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// consumer creates (or finds) the relay's durable consumer. It allows one entry in flight,
// which keeps the publishes in the order of the records.
func (o *Outbox) consumer(ctx context.Context) (jetstream.Consumer, error) {
	c, err := o.js.CreateOrUpdateConsumer(ctx, o.stream, jetstream.ConsumerConfig{
		Durable:       Consumer,
		Description:   "publishes the outbox's entries to " + events.EventsStream,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.cfg.AckWait,
		MaxAckPending: 1,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      max(o.cfg.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("ensure the relay consumer of %s: %w", o.stream, err)
	}
	return c, nil
}

// Entry is an event recorded in the outbox, for Send once the write it is about succeeded.
// The zero Entry (nothing recorded) is ignored by Send.
type Entry struct {
	Subject string
	Event   events.Event
}

// Record durably records an event about key (verb on resource, in cluster) for publication on
// hostplane.evt.<cluster>.<resource>.<verb>. Call it before writing the state the event is
// about and, once the write succeeded, Send the entry; the relay publishes it otherwise (the
// writer died, or Send failed). If the write fails, the event is harmless (consumers re-read
// state). An error means nothing was recorded, and the caller must not write.
func (o *Outbox) Record(ctx context.Context, cluster string, resource events.Resource, verb, key string, data any) (Entry, error) {
	subject, ev, err := events.NewOn(o.source, cluster, resource, verb, key, data)
	if err != nil {
		return Entry{}, err
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return Entry{}, fmt.Errorf("marshal event: %w", err)
	}
	msg := nats.NewMsg(o.subject)
	msg.Data = b
	msg.Header.Set(HeaderSubject, subject)
	msg.Header.Set("Content-Type", "application/cloudevents+json")
	observe.InjectNATS(ctx, msg.Header)
	if _, err := o.js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(o.stream)); err != nil {
		return Entry{}, fmt.Errorf("record %s about %s in the outbox: %w", ev.Type, key, err)
	}
	return Entry{Subject: subject, Event: ev}, nil
}

// Send publishes entries whose write succeeded, at once, in order, with ctx's trace. It is
// best effort: a failure is logged and counted, and the relay publishes the entry later. The
// relay's own publish of a sent entry is a duplicate that JetStream drops.
func (o *Outbox) Send(ctx context.Context, entries ...Entry) {
	for _, e := range entries {
		if e.Event.ID == "" {
			continue
		}
		if _, err := bus.PublishEvent(ctx, o.js, e.Subject, e.Event); err != nil {
			o.m.failures.Inc()
			o.log.WarnContext(ctx, "publish a recorded event; the relay will", "event", e.Event.Type, "key", e.Event.Subject, "err", err)
			return // keep the order: the relay publishes the rest
		}
	}
}
