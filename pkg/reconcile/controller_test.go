package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const wait = 10 * time.Second

// run starts a controller until the test ends (or stop is called) and waits for it to attach.
func run(t *testing.T, js jetstream.JetStream, cfg reconcile.Config, r reconcile.Reconciler) (c *reconcile.Controller, stop func()) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.FilterSubjects == nil {
		cfg.FilterSubjects = []string{events.ResourceFilter(events.ResourceCluster)}
	}
	c, err := reconcile.New(js, cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testenv.Eventually(t, wait, c.Started, "controller did not start")
	return c, stop
}

func publish(t *testing.T, js jetstream.JetStream, cluster string) {
	t.Helper()
	p := bus.NewPublisher(js, "test")
	if _, err := p.Publish(context.Background(), cluster, events.ResourceCluster, "updated", cluster, nil); err != nil {
		t.Fatal(err)
	}
}

// recorder counts reconciles per key.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[key]
}

func (r *recorder) Reconcile(_ context.Context, key string) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[key]++
	return reconcile.Result{}, nil
}

func ackPending(t *testing.T, js jetstream.JetStream, durable string) int {
	t.Helper()
	cons, err := js.Consumer(context.Background(), events.EventsStream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending + int(info.NumPending)
}

func TestController_EventReachesReconcilerWithItsClusterKey(t *testing.T) {
	env := testenv.NATS(t)
	rec := &recorder{}
	run(t, env.JS, reconcile.Config{}, rec)
	publish(t, env.JS, "demo")
	testenv.Eventually(t, wait, func() bool { return rec.count("demo") == 1 }, "demo not reconciled")
	testenv.Eventually(t, wait, func() bool { return ackPending(t, env.JS, "test") == 0 }, "message not acknowledged")
}

func TestController_NeverRunsOneKeyTwiceAtOnce(t *testing.T) {
	env := testenv.NATS(t)
	var running, maxRunning, calls atomic.Int32
	release := make(chan struct{})
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		if calls.Add(1) == 1 {
			<-release // hold the first reconcile while more events for the key arrive
		}
		return reconcile.Result{}, nil
	})
	run(t, env.JS, reconcile.Config{Workers: 8}, r)
	publish(t, env.JS, "demo")
	testenv.Eventually(t, wait, func() bool { return running.Load() == 1 }, "first reconcile did not start")
	for range 20 {
		publish(t, env.JS, "demo")
	}
	testenv.Eventually(t, wait, func() bool {
		return int(ackPendingNoFail(env.JS)) == 21
	}, "events not delivered")
	close(release)
	testenv.Eventually(t, wait, func() bool { return ackPending(t, env.JS, "test") == 0 }, "events not acknowledged")
	if maxRunning.Load() != 1 {
		t.Fatalf("key ran %d times at once", maxRunning.Load())
	}
	// 20 events that arrived during one run coalesce: far fewer runs than events, and at
	// least one run after the events that came meanwhile.
	if c := calls.Load(); c < 2 || c > 5 {
		t.Fatalf("reconciles = %d for 21 events, want 2..5 (coalesced)", c)
	}
}

func ackPendingNoFail(js jetstream.JetStream) int {
	cons, err := js.Consumer(context.Background(), events.EventsStream, "test")
	if err != nil {
		return -1
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		return -1
	}
	return info.NumAckPending
}

func TestController_RetriesErrorsWithBackoffAndAcksOnSuccess(t *testing.T) {
	env := testenv.NATS(t)
	var calls atomic.Int32
	var times []time.Time
	var mu sync.Mutex
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if calls.Add(1) <= 3 {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	})
	reg := prometheus.NewRegistry()
	run(t, env.JS, reconcile.Config{BaseBackoff: 50 * time.Millisecond, Registry: reg}, r)
	publish(t, env.JS, "demo")
	testenv.Eventually(t, wait, func() bool { return calls.Load() == 4 }, "not retried to success")
	testenv.Eventually(t, wait, func() bool { return ackPending(t, env.JS, "test") == 0 }, "not acknowledged after success")
	mu.Lock()
	defer mu.Unlock()
	// Backoff doubles: 50ms, 100ms, 200ms between the four attempts.
	for i, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		if gap := times[i+1].Sub(times[i]); gap < want {
			t.Errorf("retry %d came after %v, want at least %v", i+1, gap, want)
		}
	}
	if got := testutil.ToFloat64(counter(t, reg, "hostplane_reconcile_errors_total")); got != 3 {
		t.Errorf("hostplane_reconcile_errors_total = %v, want 3", got)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
			c.Add(sum)
			return c
		}
	}
	t.Fatalf("metric %s not found", name)
	return nil
}

func TestController_RestartedConsumerGetsWhatWasNotAcknowledged(t *testing.T) {
	env := testenv.NATS(t)
	failing := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		return reconcile.Result{}, errors.New("crashing before the work is done")
	})
	var firstCalls atomic.Int32
	counting := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		firstCalls.Add(1)
		return failing(ctx, key)
	})
	_, stop := run(t, env.JS, reconcile.Config{Durable: "componentd", Resync: -1}, counting)
	publish(t, env.JS, "demo")
	testenv.Eventually(t, wait, func() bool { return firstCalls.Load() >= 1 }, "first run never saw the event")
	stop() // the daemon goes away without finishing demo

	// A new process (another connection) with the same durable consumer.
	_, js2 := env.ConnectAs(t, natsauth.Admin)
	rec := &recorder{}
	run(t, js2, reconcile.Config{Durable: "componentd", Resync: -1}, rec)
	testenv.Eventually(t, wait, func() bool { return rec.count("demo") >= 1 }, "restarted consumer did not get the unacknowledged event")
	testenv.Eventually(t, wait, func() bool { return ackPending(t, js2, "componentd") == 0 }, "not acknowledged after the restart")
}

func TestController_MalformedMessagesAreRejectedAndDoNotBlock(t *testing.T) {
	env := testenv.NATS(t)
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	run(t, env.JS, reconcile.Config{Registry: reg}, rec)
	ctx := context.Background()
	if _, err := env.JS.Publish(ctx, "hostplane.evt.demo.cluster.updated", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	ev, _ := events.New("/x", events.ResourceCluster, "updated", "x", nil)
	if _, err := bus.PublishEvent(ctx, env.JS, "hostplane.evt.BAD_NAME.cluster.updated", ev); err != nil {
		t.Fatal(err)
	}
	publish(t, env.JS, "good")
	testenv.Eventually(t, wait, func() bool { return rec.count("good") == 1 }, "a good event after bad ones was not handled")
	testenv.Eventually(t, wait, func() bool {
		return testutil.ToFloat64(counter(t, reg, "hostplane_events_rejected_total")) == 2
	}, "rejections not counted")
	if n := len(rec.calls); n != 1 {
		t.Fatalf("reconciled keys %v, want only good", rec.calls)
	}
	testenv.Eventually(t, wait, func() bool { return ackPending(t, env.JS, "test") == 0 }, "malformed messages still pending")
}

func TestController_ResyncAndRequeueAfter(t *testing.T) {
	env := testenv.NATS(t)
	var calls atomic.Int32
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			return reconcile.Result{RequeueAfter: 30 * time.Millisecond}, nil
		}
		return reconcile.Result{}, nil
	})
	run(t, env.JS, reconcile.Config{
		ListKeys: func(context.Context) ([]string, error) { return []string{"owned"}, nil },
	}, r)
	// No event at all: the start-up resync finds the key, and RequeueAfter runs it again.
	testenv.Eventually(t, wait, func() bool { return calls.Load() == 2 }, "resync + requeue did not run twice")
}
