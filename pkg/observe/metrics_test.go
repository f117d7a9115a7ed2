package observe

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNewRegistry_HasRuntimeCollectorsAndIsFresh(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	if a == b || prometheus.Registerer(a) == prometheus.DefaultRegisterer {
		t.Fatal("registries must be fresh and not the global default")
	}
	mfs, err := a.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	want := map[string]bool{"go_goroutines": false, "process_start_time_seconds": false}
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()]; ok {
			want[mf.GetName()] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("metric %s missing", name)
		}
	}
	// A second daemon's registry accepts the same metric names.
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hostplane_test_total", Help: "test"})
	if err := a.Register(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "hostplane_test_total", Help: "test"})); err != nil {
		t.Errorf("second registry: %v", err)
	}
}
