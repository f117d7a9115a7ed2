package observe

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Attribute keys the logger adds to records logged with a context that carries a span.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// NewLogger returns a JSON logger writing to w at level and above. A record logged with a
// context that carries a valid OpenTelemetry span (logger.InfoContext(ctx, ...)) gets
// "trace_id" and "span_id" attributes at the top level, even under WithGroup.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	base := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(&traceHandler{base: base, cur: base})
}

// traceHandler adds the span of a record's context to the record.
//
// Attributes added to a record land inside whatever groups the handler has opened, so while no
// group is open the trace attributes are simply appended to the record. Once a group is open,
// the handler rebuilds the chain from the root for records that carry a span: the root gets the
// trace attributes first, then the recorded WithAttrs/WithGroup calls are replayed.
type traceHandler struct {
	base    slog.Handler // the root handler, without any WithAttrs/WithGroup
	cur     slog.Handler // base with ops applied
	ops     []handlerOp
	grouped bool
}

// handlerOp is one WithAttrs (group == "") or WithGroup call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

var _ slog.Handler = (*traceHandler)(nil)

func (h *traceHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.cur.Enabled(ctx, level)
}

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.cur.Handle(ctx, r)
	}
	ids := []slog.Attr{
		slog.String(TraceIDKey, sc.TraceID().String()),
		slog.String(SpanIDKey, sc.SpanID().String()),
	}
	if !h.grouped {
		r = r.Clone()
		r.AddAttrs(ids...)
		return h.cur.Handle(ctx, r)
	}
	hh := h.base.WithAttrs(ids)
	for _, op := range h.ops {
		hh = op.apply(hh)
	}
	return hh.Handle(ctx, r)
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(handlerOp{attrs: attrs})
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(handlerOp{group: name})
}

func (h *traceHandler) with(op handlerOp) *traceHandler {
	ops := make([]handlerOp, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)
	return &traceHandler{
		base:    h.base,
		cur:     op.apply(h.cur),
		ops:     append(ops, op),
		grouped: h.grouped || op.group != "",
	}
}

func (op handlerOp) apply(h slog.Handler) slog.Handler {
	if op.group != "" {
		return h.WithGroup(op.group)
	}
	return h.WithAttrs(op.attrs)
}
