package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func tracer(t *testing.T, exp *tracetest.InMemoryExporter) *sdktrace.TracerProvider {
	t.Helper()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "test", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// publishTraced publishes an event about cluster from a new trace and returns its root span.
func publishTraced(t *testing.T, tp trace.TracerProvider, js jetstream.JetStream, cluster string) trace.SpanContext {
	t.Helper()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	if _, err := bus.NewPublisher(js, "test").Publish(ctx, cluster, events.ResourceCluster, "updated", cluster, nil); err != nil {
		t.Fatal(err)
	}
	return span.SpanContext()
}

func reconcileSpans(exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == "reconcile test" {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// Events that wait while their key is being reconciled coalesce into one more run: its span
// continues the trace of the latest of them and links to the others.
func TestController_CoalescedRunContinuesTheLatestTraceAndLinksTheOthers(t *testing.T) {
	env := testenv.NATS(t)
	exp := tracetest.NewInMemoryExporter()
	tp := tracer(t, exp)
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	var calls atomic.Int32
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		return reconcile.Result{}, nil
	})
	reg := prometheus.NewRegistry()
	run(t, env.JS, reconcile.Config{TracerProvider: tp, Registry: reg}, r)

	first := publishTraced(t, tp, env.JS, "demo")
	<-entered
	second := publishTraced(t, tp, env.JS, "demo")
	third := publishTraced(t, tp, env.JS, "demo")
	// Both wait for the key: the controller has received them before the first run ends.
	testenv.Eventually(t, wait, func() bool {
		return testutil.ToFloat64(counter(t, reg, "hostplane_events_received_total")) == 3
	}, "events not received")
	close(release)
	testenv.Eventually(t, wait, func() bool { return len(reconcileSpans(exp)) == 2 }, "want two reconcile spans")

	spans := reconcileSpans(exp)
	if got := spans[0].SpanContext.TraceID(); got != first.TraceID() {
		t.Errorf("first run in trace %s, want the first event's %s", got, first.TraceID())
	}
	run2 := spans[1]
	if got := run2.SpanContext.TraceID(); got != third.TraceID() {
		t.Errorf("coalesced run in trace %s, want the latest event's %s", got, third.TraceID())
	}
	if run2.Parent.SpanID() == third.SpanID() {
		t.Errorf("parent is the request span itself, want the publish span under it")
	}
	if len(run2.Links) != 1 || run2.Links[0].SpanContext.TraceID() != second.TraceID() {
		t.Errorf("links = %+v, want one to the second event's trace %s", run2.Links, second.TraceID())
	}
	if got := attrOf(run2, "hostplane.events"); got != "2" {
		t.Errorf("hostplane.events = %s, want 2", got)
	}
}

// A run no event triggered (RequeueAfter here) continues the trace of the run before it.
func TestController_RequeuedRunContinuesTheTrace(t *testing.T) {
	env := testenv.NATS(t)
	exp := tracetest.NewInMemoryExporter()
	tp := tracer(t, exp)
	var calls atomic.Int32
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			return reconcile.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return reconcile.Result{}, nil
	})
	run(t, env.JS, reconcile.Config{TracerProvider: tp}, r)
	root := publishTraced(t, tp, env.JS, "demo")
	testenv.Eventually(t, wait, func() bool { return len(reconcileSpans(exp)) == 2 }, "want two reconcile spans")
	spans := reconcileSpans(exp)
	if spans[0].SpanContext.TraceID() != root.TraceID() || spans[1].SpanContext.TraceID() != root.TraceID() {
		t.Fatalf("runs in traces %s and %s, want both in %s", spans[0].SpanContext.TraceID(), spans[1].SpanContext.TraceID(), root.TraceID())
	}
	if spans[1].Parent.SpanID() != spans[0].SpanContext.SpanID() {
		t.Errorf("requeued run's parent %s, want the first run %s", spans[1].Parent.SpanID(), spans[0].SpanContext.SpanID())
	}
	if got := attrOf(spans[1], "hostplane.trigger"); got != "follow" {
		t.Errorf("hostplane.trigger = %q, want follow", got)
	}
}

// EnqueueContext makes the run a child of the caller's span (an HTTP handler's, say).
func TestController_EnqueueContextRunIsAChildOfTheCaller(t *testing.T) {
	env := testenv.NATS(t)
	exp := tracetest.NewInMemoryExporter()
	tp := tracer(t, exp)
	c, _ := run(t, env.JS, reconcile.Config{TracerProvider: tp}, &recorder{})
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	c.EnqueueContext(ctx, "demo")
	span.End()
	testenv.Eventually(t, wait, func() bool { return len(reconcileSpans(exp)) == 1 }, "no reconcile span")
	if got := reconcileSpans(exp)[0].Parent; got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("parent = %s, want the caller's span %s", got.SpanID(), span.SpanContext().SpanID())
	}
}
