package observe

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// InjectNATS writes ctx's trace context (traceparent, tracestate, baggage) into h, so the
// consumer of the message continues the same trace. h must be non-nil (nats.NewMsg makes one);
// a nil h is left alone.
func InjectNATS(ctx context.Context, h nats.Header) {
	if h == nil {
		return
	}
	propagator.Inject(ctx, natsCarrier(h))
}

// ExtractNATS returns ctx carrying the remote trace context found in h, if any. Spans started
// from the result are children of the publisher's span.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, natsCarrier(h))
}

// natsCarrier adapts nats.Header, whose keys are case-sensitive, to propagation.TextMapCarrier.
// The propagators use lower-case keys; Get also accepts any other casing a foreign publisher
// may have used.
type natsCarrier nats.Header

var _ propagation.TextMapCarrier = natsCarrier(nil)

func (c natsCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c natsCarrier) Keys() []string { return slices.Collect(maps.Keys(c)) }
