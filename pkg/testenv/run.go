package testenv

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Run runs run (a daemon's Run, a controller's Start) in the background until the test ends
// or stop is called; stop cancels its context, waits for it to return and fails the test if
// it returned an error. ctx is the context run receives.
func Run(t testing.TB, name string, run func(ctx context.Context) error) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return ctx, stop
}

// Metric returns the value of the series called name whose labels include labels (other
// labels ignored): a gauge's or counter's value, a histogram's sample count. ok is false when
// no such series exists.
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}
