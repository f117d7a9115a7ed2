package observe

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func newTestProvider(t *testing.T, exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	t.Helper()
	tp, err := NewTracerProvider(context.Background(), TracingConfig{ServiceName: "test", Exporter: exp})
	if err != nil {
		t.Fatalf("NewTracerProvider: %v", err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

func TestNewTracerProvider_InMemoryExporterSeesEndedSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := newTestProvider(t, exp)

	_, span := tp.Tracer("test").Start(context.Background(), "reconcile")
	span.End()

	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("exported %d spans, want 1", len(spans))
	}
	if spans[0].Name != "reconcile" {
		t.Errorf("span name = %q, want reconcile", spans[0].Name)
	}
	var service string
	for _, kv := range spans[0].Resource.Attributes() {
		if kv.Key == "service.name" {
			service = kv.Value.AsString()
		}
	}
	if service != "test" {
		t.Errorf("service.name = %q, want test", service)
	}
}

func TestNewTracerProvider_Config(t *testing.T) {
	tests := []struct {
		name    string
		cfg     TracingConfig
		wantErr error
	}{
		{name: "no service name", cfg: TracingConfig{}, wantErr: ErrNoServiceName},
		{name: "no exporter", cfg: TracingConfig{ServiceName: "clusterd"}},
		{name: "otlp host:port", cfg: TracingConfig{ServiceName: "clusterd", OTLPEndpoint: "127.0.0.1:4318"}},
		{name: "otlp url", cfg: TracingConfig{ServiceName: "clusterd", OTLPEndpoint: "http://127.0.0.1:4318"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := NewTracerProvider(context.Background(), tt.cfg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			// Shut down before anything was exported: no collector is needed.
			if err := tp.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

func TestStartSpan_IsAChildOfTheContextsSpanByItsProvider(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := newTestProvider(t, exp)

	ctx, parent := tp.Tracer("test").Start(context.Background(), "reconcile")
	_, step := StartSpan(ctx, "pkid issue")
	EndSpan(step, errors.New("no infra"))
	parent.End()

	// Without a span in the context (tracing off) the step is a no-op.
	_, none := StartSpan(context.Background(), "pkid issue")
	if none.IsRecording() {
		t.Error("a step outside any span records")
	}
	EndSpan(none, nil)

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("exported %d spans, want 2", len(spans))
	}
	got := spans[0]
	if got.Name != "pkid issue" || got.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("step %q under %s, want \"pkid issue\" under the reconcile span", got.Name, got.Parent.SpanID())
	}
	if got.Status.Code != codes.Error || got.Status.Description != "no infra" {
		t.Errorf("status = %+v, want the error", got.Status)
	}
}
