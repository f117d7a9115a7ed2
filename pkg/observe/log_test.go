package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestNewLogger_AddsTraceIDsForContextWithSpan(t *testing.T) {
	tp := newTestProvider(t, tracetest.NewInMemoryExporter())
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	want := span.SpanContext()

	tests := []struct {
		name      string
		log       func(l *slog.Logger)
		wantTrace bool
		check     func(t *testing.T, rec map[string]any)
	}{
		{
			name:      "context with span",
			log:       func(l *slog.Logger) { l.InfoContext(ctx, "hello", "k", "v") },
			wantTrace: true,
		},
		{
			name:      "context without span",
			log:       func(l *slog.Logger) { l.InfoContext(context.Background(), "hello") },
			wantTrace: false,
		},
		{
			name:      "no context",
			log:       func(l *slog.Logger) { l.Info("hello") },
			wantTrace: false,
		},
		{
			name:      "with attrs keeps them",
			log:       func(l *slog.Logger) { l.With("component", "clusterd").InfoContext(ctx, "hello") },
			wantTrace: true,
			check: func(t *testing.T, rec map[string]any) {
				if rec["component"] != "clusterd" {
					t.Errorf("component = %v, want clusterd", rec["component"])
				}
			},
		},
		{
			name: "trace ids stay top level under a group",
			log: func(l *slog.Logger) {
				l.With("a", 1).WithGroup("req").With("b", 2).InfoContext(ctx, "hello", "c", 3)
			},
			wantTrace: true,
			check: func(t *testing.T, rec map[string]any) {
				req, _ := rec["req"].(map[string]any)
				if rec["a"] != 1.0 || req["b"] != 2.0 || req["c"] != 3.0 {
					t.Errorf("attrs misplaced: %v", rec)
				}
				if _, ok := req[TraceIDKey]; ok {
					t.Errorf("trace_id inside the group: %v", rec)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(NewLogger(&buf, slog.LevelInfo))
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("not one JSON record: %v: %q", err, buf.String())
			}
			gotTrace, hasTrace := rec[TraceIDKey]
			if hasTrace != tt.wantTrace {
				t.Fatalf("trace_id present = %v, want %v: %s", hasTrace, tt.wantTrace, buf.String())
			}
			if tt.wantTrace {
				if gotTrace != want.TraceID().String() {
					t.Errorf("trace_id = %v, want %s", gotTrace, want.TraceID())
				}
				if rec[SpanIDKey] != want.SpanID().String() {
					t.Errorf("span_id = %v, want %s", rec[SpanIDKey], want.SpanID())
				}
			}
			if tt.check != nil {
				tt.check(t, rec)
			}
		})
	}
}

func TestNewLogger_RespectsLevel(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelWarn)
	l.Info("dropped")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %q", buf.String())
	}
	l.Warn("kept")
	if buf.Len() == 0 {
		t.Fatal("warn not logged")
	}
}
