package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hostplane/hostplane/pkg/observe"
)

func TestRegister_ReturnsTheCollectorAlreadyRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "hostplane_test_total", Help: "test"}
	first, err := observe.Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	second, err := observe.Register(reg, prometheus.NewCounter(opts))
	if err != nil || second != first {
		t.Fatalf("second Register = %v, %v; want the first collector", second, err)
	}
	if _, err := observe.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "hostplane_test_total", Help: "other"})); err == nil {
		t.Fatal("a different collector under the same name was accepted")
	}
}

func TestRegister_WithoutRegistryRegistersNothing(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hostplane_test_total", Help: "test"})
	got, err := observe.Register(nil, c)
	if err != nil || got != c {
		t.Fatalf("Register(nil) = %v, %v; want the collector and no error", got, err)
	}
}

func TestRegistrar_SharesCollectorsAndKeepsEveryError(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "hostplane_test_total", Help: "test"}
	first := observe.NewRegistrar(reg)
	a := observe.Add(first, prometheus.NewCounterVec(opts, []string{"daemon"}))
	if err := first.Err(); err != nil {
		t.Fatal(err)
	}

	// A second daemon on the same registry gets the first one's collector.
	second := observe.NewRegistrar(reg)
	b := observe.Add(second, prometheus.NewCounterVec(opts, []string{"daemon"}))
	if err := second.Err(); err != nil || b != a {
		t.Fatalf("second Add = %p (err %v), want the first collector %p", b, err, a)
	}
	b.WithLabelValues("clusterd").Inc()
	if n := testutil.ToFloat64(a.WithLabelValues("clusterd")); n != 1 {
		t.Errorf("the shared counter = %v, want 1", n)
	}

	// A clash is an error, and Adds after it neither hide it nor are skipped.
	third := observe.NewRegistrar(reg)
	observe.Add(third, prometheus.NewGauge(prometheus.GaugeOpts{Name: "hostplane_test_total", Help: "other"}))
	after := observe.Add(third, prometheus.NewGauge(prometheus.GaugeOpts{Name: "hostplane_test_after", Help: "test"}))
	if third.Err() == nil {
		t.Fatal("a different collector under the same name was accepted")
	}
	if err := reg.Register(after); err == nil {
		t.Error("the Add after the error did not register its collector")
	}

	none := observe.NewRegistrar(nil)
	if c := prometheus.NewCounter(opts); observe.Add(none, c) != c || none.Err() != nil {
		t.Errorf("a Registrar without registry: %v, want the collector back and no error", none.Err())
	}
}
