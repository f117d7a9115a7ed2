package bus_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// Publishing inside a span makes a producer span under it, and the message's headers carry
// that producer span, so the consumer's span hangs off the publish.
func TestPublish_InsideASpan_MakesAProducerSpanTheHeadersCarry(t *testing.T) {
	env := testenv.NATS(t)
	exp := tracetest.NewInMemoryExporter()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "test", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	ctx, span := tp.Tracer("test").Start(context.Background(), "reconcile")
	if _, err := bus.NewPublisher(env.JS, "test").Publish(ctx, "demo", events.ResourceCluster, "created", "demo", nil); err != nil {
		t.Fatal(err)
	}
	span.End()

	var producer trace.SpanContext
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindProducer {
			producer = s.SpanContext
			if s.Name != "publish io.hostplane.cluster.created" || s.Parent.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("producer span %q under %s, want \"publish io.hostplane.cluster.created\" under the reconcile span", s.Name, s.Parent.SpanID())
			}
		}
	}
	if !producer.IsValid() {
		t.Fatal("no producer span")
	}
	stream, err := env.JS.Stream(context.Background(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetLastMsgForSubject(context.Background(), "hostplane.evt.demo.cluster.created")
	if err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(observe.ExtractNATS(context.Background(), raw.Header))
	if got.TraceID() != producer.TraceID() || got.SpanID() != producer.SpanID() {
		t.Errorf("headers carry %s/%s, want the producer span %s/%s", got.TraceID(), got.SpanID(), producer.TraceID(), producer.SpanID())
	}
}
