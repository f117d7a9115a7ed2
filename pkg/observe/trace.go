package observe

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
)

// TracingConfig says where a daemon's spans go.
type TracingConfig struct {
	// ServiceName is the daemon's name, reported as the service.name resource attribute.
	ServiceName string
	// OTLPEndpoint is an OTLP/HTTP collector: "host:port" (plain HTTP) or a URL such as
	// "https://otel.example:4318" (the path defaults to /v1/traces). Empty: spans are not
	// exported, but they are still created, so trace ids still propagate and reach the logs.
	OTLPEndpoint string
	// Exporter, when set, is used instead of OTLP and is fed synchronously: each span is
	// exported as it ends, so a test's tracetest.InMemoryExporter sees it without a flush.
	Exporter sdktrace.SpanExporter
}

// NewTracerProvider builds a tracer provider for one daemon. It does not install it as the
// OpenTelemetry global; pass it to whatever needs a tracer. The caller owns Shutdown, which
// flushes pending spans.
func NewTracerProvider(ctx context.Context, cfg TracingConfig) (*sdktrace.TracerProvider, error) {
	if cfg.ServiceName == "" {
		return nil, ErrNoServiceName
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil {
		return nil, fmt.Errorf("observe: tracing resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	}
	switch {
	case cfg.Exporter != nil:
		opts = append(opts, sdktrace.WithSyncer(cfg.Exporter))
	case cfg.OTLPEndpoint != "":
		exp, err := newOTLPExporter(ctx, cfg.OTLPEndpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

func newOTLPExporter(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	var opt []otlptracehttp.Option
	if strings.Contains(endpoint, "://") {
		opt = append(opt, otlptracehttp.WithEndpointURL(endpoint))
	} else {
		opt = append(opt, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opt...)
	if err != nil {
		return nil, fmt.Errorf("observe: OTLP exporter for %q: %w", endpoint, err)
	}
	return exp, nil
}

// propagator is W3C Trace Context plus Baggage, used explicitly so that nothing depends on the
// OpenTelemetry global propagator being set.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator returns the propagator hostplane uses on every boundary (NATS headers, HTTP):
// W3C traceparent/tracestate and baggage.
func Propagator() propagation.TextMapPropagator { return propagator }

// StartSpan starts a child span of ctx's span with that span's own tracer provider, for the
// steps of a reconcile or a request ("issue certificates", "start kube-apiserver"): code deep
// in a daemon needs no provider of its own. Without a span in ctx (tracing off) the span is a
// no-op. End it with EndSpan to record an error.
func StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(stepTracer).Start(ctx, name, trace.WithAttributes(attrs...))
}

// EndSpan ends span, marking it failed when err is not nil. It is made for
// `defer func() { observe.EndSpan(span, err) }()` with a named error result.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

const stepTracer = "github.com/hostplane/hostplane"
