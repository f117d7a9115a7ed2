package testenv_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestMetric_FindsTheSeriesByLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hostplane_x_total", Help: "x"}, []string{"cluster", "cert"})
	reg.MustRegister(c)
	c.WithLabelValues("a", "admin").Add(3)
	c.WithLabelValues("b", "admin").Add(5)
	if v, ok := testenv.Metric(t, reg, "hostplane_x_total", map[string]string{"cluster": "b"}); !ok || v != 5 {
		t.Fatalf("Metric = %v, %v; want 5, true", v, ok)
	}
	if _, ok := testenv.Metric(t, reg, "hostplane_x_total", map[string]string{"cluster": "c"}); ok {
		t.Fatal("found a series that does not exist")
	}
}

func TestRun_StopsAtCleanupAndWaits(t *testing.T) {
	returned := make(chan struct{})
	ctx, stop := testenv.Run(t, "loop", func(ctx context.Context) error {
		<-ctx.Done()
		close(returned)
		return nil
	})
	stop()
	select {
	case <-returned:
	default:
		t.Fatal("stop returned before run did")
	}
	if ctx.Err() == nil {
		t.Fatal("run's context was not cancelled")
	}
	stop() // idempotent
}
