package componentd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	obs "github.com/hostplane/hostplane/pkg/observe"
)

type metrics struct {
	available *prometheus.GaugeVec
	rollout   *prometheus.HistogramVec
	restarts  *prometheus.CounterVec
	replicas  *prometheus.GaugeVec
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
	replicas, err := obs.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_component_replicas",
		Help: "Replicas of the control-plane component by state: desired, ready, updated (ready at the component's current version and config hash; updated/desired is the rollout's progress).",
	}, []string{"cluster", "component", "state"}))
	if err != nil {
		return nil, err
	}
	// Every component's rollout histogram is exported at zero from the start: a series born at
	// its first observation never shows that observation in a rate.
	for _, c := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter} {
		rollout.WithLabelValues(c)
	}
	return &metrics{available: available, rollout: rollout, restarts: restarts, replicas: replicas}, nil
}

// observeReplicas sets the replica counts of the component: the rollout's progress is
// updated (ready at the current version and config hash) of desired.
func (m *metrics) observeReplicas(cluster, comp string, desired, ready, updated int) {
	m.replicas.WithLabelValues(cluster, comp, "desired").Set(float64(desired))
	m.replicas.WithLabelValues(cluster, comp, "ready").Set(float64(ready))
	m.replicas.WithLabelValues(cluster, comp, "updated").Set(float64(updated))
	m.restarts.WithLabelValues(cluster, comp) // exported at zero before the first restart
}

// forget drops the cluster's series.
func (m *metrics) forget(cluster string) {
	m.available.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.restarts.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.replicas.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}
