package observe

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestInjectExtractNATS_RoundTripKeepsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := newTestProvider(t, exp)
	ctx, pub := tp.Tracer("publisher").Start(context.Background(), "publish")
	pub.End()

	msg := nats.NewMsg("hostplane.evt.demo.cluster.created")
	InjectNATS(ctx, msg.Header)
	if msg.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent header: %v", msg.Header)
	}

	got := ExtractNATS(context.Background(), msg.Header)
	remote := trace.SpanContextFromContext(got)
	if !remote.IsRemote() || remote.TraceID() != pub.SpanContext().TraceID() {
		t.Fatalf("extracted %v, want remote span of trace %s", remote, pub.SpanContext().TraceID())
	}

	_, sub := tp.Tracer("consumer").Start(got, "consume")
	sub.End()
	spans := exp.GetSpans()
	last := spans[len(spans)-1]
	if last.SpanContext.TraceID() != pub.SpanContext().TraceID() || last.Parent.SpanID() != pub.SpanContext().SpanID() {
		t.Errorf("consumer span trace/parent = %s/%s, want %s/%s",
			last.SpanContext.TraceID(), last.Parent.SpanID(), pub.SpanContext().TraceID(), pub.SpanContext().SpanID())
	}
}

func TestExtractNATS_Headers(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name      string
		header    nats.Header
		wantTrace string
	}{
		{name: "nil header", header: nil},
		{name: "no trace headers", header: nats.Header{"Nats-Msg-Id": {"x"}}},
		{name: "lower case", header: nats.Header{"traceparent": {traceparent}}, wantTrace: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{name: "canonical case", header: nats.Header{"Traceparent": {traceparent}}, wantTrace: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{name: "malformed", header: nats.Header{"traceparent": {"garbage"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(ExtractNATS(context.Background(), tt.header))
			got := ""
			if sc.IsValid() {
				got = sc.TraceID().String()
			}
			if got != tt.wantTrace {
				t.Errorf("trace id = %q, want %q", got, tt.wantTrace)
			}
		})
	}
}

func TestInjectNATS_WithoutSpanOrHeaderIsNoop(t *testing.T) {
	InjectNATS(context.Background(), nil) // must not panic
	h := nats.Header{}
	InjectNATS(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("headers written without a span: %v", h)
	}
}
