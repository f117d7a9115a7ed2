package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
