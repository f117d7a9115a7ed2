package infrad

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Metric names.
const (
	MetricLBConnections  = "hostplane_infra_lb_connections_total"
	MetricLBDialFailures = "hostplane_infra_lb_dial_failures_total"
	MetricClusters       = "hostplane_infra_clusters"
)

type metrics struct {
	lbConnections  *prometheus.CounterVec
	lbDialFailures *prometheus.CounterVec
	clusters       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lbConnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLBConnections,
			Help: "Client connections the cluster's kube-apiserver load balancer forwarded, by cluster and backend.",
		}, []string{"cluster", "backend"}),
		lbDialFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLBDialFailures,
			Help: "Backend dials of the load balancer that failed (the connection went to the next backend), by cluster and backend.",
		}, []string{"cluster", "backend"}),
		clusters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricClusters,
			Help: "Clusters with ready infrastructure allocated by this infrad.",
		}),
	}
	var err error
	if m.lbConnections, err = observe.Register(reg, m.lbConnections); err != nil {
		return nil, err
	}
	if m.lbDialFailures, err = observe.Register(reg, m.lbDialFailures); err != nil {
		return nil, err
	}
	if m.clusters, err = observe.Register(reg, m.clusters); err != nil {
		return nil, err
	}
	return m, nil
}

// forget drops a deleted cluster's series.
func (m *metrics) forget(cluster string) {
	m.lbConnections.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.lbDialFailures.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}
