package observe_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/observe"
)

// A publisher puts its trace context into a NATS message; the consumer continues the trace.
func Example() {
	ctx := context.Background()
	tp, err := observe.NewTracerProvider(ctx, observe.TracingConfig{
		ServiceName: "clusterd",
		Exporter:    tracetest.NewInMemoryExporter(),
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = tp.Shutdown(ctx) }()
	log := observe.NewLogger(os.Stderr, slog.LevelInfo)

	ctx, span := tp.Tracer("clusterd").Start(ctx, "create cluster")
	defer span.End()
	log.InfoContext(ctx, "publishing", "subject", "hostplane.evt.demo.cluster.created") // has trace_id

	msg := nats.NewMsg("hostplane.evt.demo.cluster.created")
	observe.InjectNATS(ctx, msg.Header)

	consumer := observe.ExtractNATS(context.Background(), msg.Header)
	same := trace.SpanContextFromContext(consumer).TraceID() == span.SpanContext().TraceID()
	fmt.Println("same trace:", same)
	// Output: same trace: true
}
