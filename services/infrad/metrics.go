package infrad

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/services/infrad/lb"
	"github.com/hostplane/hostplane/services/infrad/provider"
)

// MetricClusters is the daemon's own metric; the load balancers' are lb.Metric*, the machines'
// provider.Metric*.
const MetricClusters = "hostplane_infra_clusters"

// metrics are every series infrad exports, registered at setup whether or not it runs a
// machines provider.
type metrics struct {
	clusters prometheus.Gauge
	lb       *lb.Metrics
	machines *provider.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{clusters: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricClusters,
		Help: "Clusters with ready infrastructure allocated by this infrad.",
	})}
	var err error
	if m.clusters, err = observe.Register(reg, m.clusters); err != nil {
		return nil, err
	}
	if m.lb, err = lb.NewMetrics(reg); err != nil {
		return nil, err
	}
	if m.machines, err = provider.NewMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}
