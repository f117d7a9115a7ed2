package componentd

import (
	"github.com/prometheus/client_golang/prometheus"

	obs "github.com/hostplane/hostplane/pkg/observe"
)

type metrics struct {
	available *prometheus.GaugeVec
	rollout   *prometheus.HistogramVec
	restarts  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	available, err := obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_component_available",
		Help: "1 when the control-plane component is Available, else 0.",
	}, []string{"cluster", "component"}))
	if err != nil {
		return nil, err
	}
	rollout, err := obs.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hostplane_component_rollout_duration_seconds",
		Help:    "Time from a component's config hash changing (or its creation) to every replica ready at it.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"component"}))
	if err != nil {
		return nil, err
	}
	restarts, err := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_component_restarts_total",
		Help: "Times a control-plane process exited and was restarted by the supervisor.",
	}, []string{"cluster", "component"}))
	if err != nil {
		return nil, err
	}
	return &metrics{available: available, rollout: rollout, restarts: restarts}, nil
}

// forget drops the cluster's series.
func (m *metrics) forget(cluster string) {
	m.available.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.restarts.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}
