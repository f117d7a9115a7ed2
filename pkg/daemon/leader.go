package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// leaderMetrics are a daemon's leader-election series.
type leaderMetrics struct {
	leading  prometheus.Gauge
	acquired prometheus.Counter
}

// leaderMetrics registers the series on the daemon's registry, or finds them there when an
// earlier Daemon of the same name registered them (tests that restart a daemon).
func (d *Daemon) leaderMetrics() (*leaderMetrics, error) {
	labels := prometheus.Labels{"daemon": d.spec.Name}
	r := observe.NewRegistrar(d.registry)
	m := &leaderMetrics{
		leading: observe.Add(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: "hostplane_daemon_leading",
			Help: "1 while this replica holds its daemon's lease and works, 0 while it stands by.", ConstLabels: labels})),
		acquired: observe.Add(r, prometheus.NewCounter(prometheus.CounterOpts{Name: "hostplane_daemon_lease_acquired_total",
			Help: "Times this replica took its daemon's lease (a start, or a takeover from a replica that stopped or died).", ConstLabels: labels})),
	}
	return m, r.Err()
}
