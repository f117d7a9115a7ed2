package bus

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Publisher publishes one daemon's events. It is safe for concurrent use.
type Publisher struct {
	js     jetstream.JetStream
	source string
}

// NewPublisher returns a publisher whose events carry source "/hostplane/<daemon>".
func NewPublisher(js jetstream.JetStream, daemon string) *Publisher {
	return &Publisher{js: js, source: "/hostplane/" + daemon}
}

// Publish builds an event about key and publishes it on hostplane.evt.<cluster>.<resource>.<verb>.
func (p *Publisher) Publish(ctx context.Context, cluster string, resource events.Resource, verb, key string, data any) (events.Event, error) {
	subject, ev, err := events.NewOn(p.source, cluster, resource, verb, key, data)
	if err != nil {
		return events.Event{}, err
	}
	_, err = PublishEvent(ctx, p.js, subject, ev)
	return ev, err
}

// PublishEvent publishes ev on subject with Nats-Msg-Id = ev.ID (so a retried publish is
// stored once) and the trace context of ctx in the headers. It reports whether JetStream
// recognised the message as a duplicate.
func PublishEvent(ctx context.Context, js jetstream.JetStream, subject string, ev events.Event) (duplicate bool, err error) {
	// A producer span, by the tracer provider of the caller's span: a daemon's reconcile or
	// request span. Without a local span (no tracing, or only a remote parent) it is a no-op
	// span and the headers carry ctx's trace as it is.
	return PublishEventTraced(ctx, js, trace.SpanFromContext(ctx).TracerProvider(), subject, ev)
}

// PublishEventTraced is PublishEvent with the producer span made by tp, a child of ctx's
// span. A relay uses it: ctx then carries only the remote context of the span that recorded
// the event, whose tracer provider cannot be known from ctx.
func PublishEventTraced(ctx context.Context, js jetstream.JetStream, tp trace.TracerProvider, subject string, ev events.Event) (duplicate bool, err error) {
	if err := ev.Validate(); err != nil {
		return false, err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("marshal event: %w", err)
	}
	if tp == nil {
		tp = trace.SpanFromContext(ctx).TracerProvider()
	}
	ctx, span := tp.Tracer(tracerName).Start(ctx, "publish "+ev.Type,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", subject),
			attribute.String("messaging.message.id", ev.ID),
		))
	defer span.End()
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set("Content-Type", "application/cloudevents+json")
	observe.InjectNATS(ctx, msg.Header)
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return false, fmt.Errorf("publish %s: %w", subject, err)
	}
	span.SetAttributes(attribute.Bool("hostplane.duplicate", ack.Duplicate))
	return ack.Duplicate, nil
}

const tracerName = "github.com/hostplane/hostplane/pkg/bus"
