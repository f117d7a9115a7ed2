package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/observe"
)

// A front door without tracing of its own serves a daemon's routes with TraceRoutes: the
// daemon's provider makes the server span, continuing the caller's traceparent, and the front
// door's request log names the trace.
func TestTraceRoutes_DaemonSpanUnderAFrontDoorContinuesTheCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "clusterd", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Group(func(g chi.Router) {
			g.Use(TraceRoutes(func() trace.TracerProvider { return tp }))
			g.Post("/v1/clusters", func(w http.ResponseWriter, r *http.Request) {
				WriteJSON(w, http.StatusAccepted, map[string]string{"ok": "yes"})
			})
		})
	})
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res := env.request(t, "POST", "/v1/clusters", nil, map[string]string{"traceparent": caller})
	if res.status != http.StatusAccepted {
		t.Fatalf("status %d", res.status)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "POST /v1/clusters" || s.SpanKind != trace.SpanKindServer {
		t.Errorf("span %q kind %v, want a server span POST /v1/clusters", s.Name, s.SpanKind)
	}
	if s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span in trace %s under %s, want the caller's", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	var logged bool
	for _, r := range env.logs.records(t) {
		if r["msg"] == "http request" && r["trace_id"] == s.SpanContext.TraceID().String() && r["span_id"] == s.SpanContext.SpanID().String() {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no request log line with trace_id %s", s.SpanContext.TraceID())
	}
}
