package daemon

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// leaderMetrics are a daemon's leader-election series.
type leaderMetrics struct {
	leading  prometheus.Gauge
	acquired prometheus.Counter
}

// leaderMetrics registers the series on the daemon's registry, or finds them there when an
// earlier Daemon of the same name registered them (tests that restart a daemon).
func (d *Daemon) leaderMetrics() *leaderMetrics {
	labels := prometheus.Labels{"daemon": d.spec.Name}
	m := &leaderMetrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hostplane_daemon_leading",
			Help: "1 while this replica holds its daemon's lease and works, 0 while it stands by.", ConstLabels: labels}),
		acquired: prometheus.NewCounter(prometheus.CounterOpts{Name: "hostplane_daemon_lease_acquired_total",
			Help: "Times this replica took its daemon's lease (a start, or a takeover from a replica that stopped or died).", ConstLabels: labels}),
	}
	m.leading = register(d.registry, m.leading)
	m.acquired = register(d.registry, m.acquired)
	return m
}

// register registers c on r, or returns the collector r already has in its place.
func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
