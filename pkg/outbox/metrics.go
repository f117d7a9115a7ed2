package outbox

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

type metrics struct {
	pending   prometheus.Gauge
	published prometheus.Counter
	failures  prometheus.Counter
}

// newMetrics registers the outbox's series. Several daemons may share a registry (hostplane
// dev): the collectors are shared and told apart by the "daemon" label.
func newMetrics(reg prometheus.Registerer, daemon string) (*metrics, error) {
	l := prometheus.Labels{"daemon": daemon}
	r := observe.NewRegistrar(reg)
	pending := observe.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_outbox_pending",
		Help: "Events recorded in the daemon's outbox and not published yet, as its relay last saw them.",
	}, []string{"daemon"}))
	published := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_outbox_published_total",
		Help: "Outbox entries published to the events stream and removed from the outbox.",
	}, []string{"daemon"}))
	failures := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_outbox_publish_failures_total",
		Help: "Failed attempts to publish an outbox entry (each is retried with backoff).",
	}, []string{"daemon"}))
	if err := r.Err(); err != nil {
		return nil, err
	}
	return &metrics{pending: pending.With(l), published: published.With(l), failures: failures.With(l)}, nil
}
