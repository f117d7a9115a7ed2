package lb

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Metric names (deploy/grafana and deploy/prometheus use them).
const (
	MetricConnections  = "hostplane_infra_lb_connections_total"
	MetricDialFailures = "hostplane_infra_lb_dial_failures_total"
)

// Metrics are the load balancers' series, by cluster and backend. One Metrics serves every
// balancer of a daemon.
type Metrics struct {
	connections  *prometheus.CounterVec
	dialFailures *prometheus.CounterVec
}

// NewMetrics registers the load balancers' metrics with reg (or finds them registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := observe.NewRegistrar(reg)
	m := &Metrics{
		connections: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricConnections,
			Help: "Client connections the cluster's kube-apiserver load balancer forwarded, by cluster and backend.",
		}, []string{"cluster", "backend"})),
		dialFailures: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDialFailures,
			Help: "Backend dials of the load balancer that failed (the connection went to the next backend), by cluster and backend.",
		}, []string{"cluster", "backend"})),
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// Forget drops a deleted cluster's series.
func (m *Metrics) Forget(cluster string) {
	m.connections.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.dialFailures.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}

// export exports the load balancer's series of every backend at zero from the start, so a
// dashboard has them before the first connection or failure.
func (m *Metrics) export(cluster string, backends []string) {
	if m == nil {
		return
	}
	for _, b := range backends {
		m.connections.WithLabelValues(cluster, b)
		m.dialFailures.WithLabelValues(cluster, b)
	}
}
