package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func lag(t *testing.T, reg prometheus.Gatherer, name string) (float64, bool) {
	t.Helper()
	return testenv.Metric(t, reg, name, map[string]string{"controller": "test", "consumer": "test", "stream": events.EventsStream})
}

func TestLag_EventsPublishedWhileTheDaemonIsDownArePending(t *testing.T) {
	env := testenv.NATS(t)
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	// A short AckWait: events a stale pull request took come back within the test's wait.
	cfg := reconcile.Config{Registry: reg, Resync: -1, AckWait: 2 * time.Second}
	_, stop := run(t, env.JS, cfg, rec)
	stop() // the daemon goes down; its durable consumer stays

	for _, c := range []string{"a", "b", "c"} {
		publish(t, env.JS, c)
	}
	// The backlog is what is pending plus what is ack-pending: a pull request the stopped
	// controller left on the server (it lives until it expires) may still take the events,
	// which then wait as ack-pending until their AckWait passes and they are redelivered.
	testenv.Eventually(t, wait, func() bool {
		p, ok1 := lag(t, reg, reconcile.MetricConsumerPending)
		a, ok2 := lag(t, reg, reconcile.MetricConsumerAckPending)
		return ok1 && ok2 && p+a == 3
	}, "three events published while the controller was stopped are not reported as its backlog")

	// Back up (the same registry, as a daemon run again in-process): the backlog drains.
	run(t, env.JS, cfg, rec)
	testenv.Eventually(t, wait, func() bool {
		p, ok1 := lag(t, reg, reconcile.MetricConsumerPending)
		a, ok2 := lag(t, reg, reconcile.MetricConsumerAckPending)
		return ok1 && ok2 && p == 0 && a == 0
	}, "the backlog did not drain after the restart")
	for _, c := range []string{"a", "b", "c"} {
		if rec.count(c) == 0 {
			t.Errorf("%s never reconciled", c)
		}
	}
}

func TestLag_EventsWaitingForASlowReconcileAreAckPending(t *testing.T) {
	env := testenv.NATS(t)
	reg := prometheus.NewRegistry()
	release := make(chan struct{})
	r := reconcile.Func(func(ctx context.Context, key string) (reconcile.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return reconcile.Result{}, nil
	})
	run(t, env.JS, reconcile.Config{Registry: reg, Resync: -1}, r)
	for range 4 {
		publish(t, env.JS, "demo")
	}
	testenv.Eventually(t, wait, func() bool {
		a, ok := lag(t, reg, reconcile.MetricConsumerAckPending)
		p, _ := lag(t, reg, reconcile.MetricConsumerPending)
		return ok && a == 4 && p == 0
	}, "four events held by a running reconcile are not reported as ack pending")
	close(release)
	testenv.Eventually(t, wait, func() bool {
		a, ok := lag(t, reg, reconcile.MetricConsumerAckPending)
		return ok && a == 0
	}, "ack pending did not drop to zero once the reconcile finished")
}

func TestLag_ScrapeWithoutNATSAnswersWithoutLag(t *testing.T) {
	env := testenv.NATS(t)
	reg := prometheus.NewRegistry()
	run(t, env.JS, reconcile.Config{Registry: reg, Resync: -1}, &recorder{})
	testenv.Eventually(t, wait, func() bool {
		_, ok := lag(t, reg, reconcile.MetricConsumerPending)
		return ok
	}, "no lag series while NATS runs")
	env.Server.Stop()
	if _, ok := lag(t, reg, reconcile.MetricConsumerPending); ok {
		t.Fatal("lag reported while NATS is down")
	}
	if _, ok := testenv.Metric(t, reg, "hostplane_reconcile_queue_depth", map[string]string{"controller": "test"}); !ok {
		t.Fatal("the other controller series vanished with NATS")
	}
}
