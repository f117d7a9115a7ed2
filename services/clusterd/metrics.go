package clusterd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

// metrics are clusterd's own series: how many clusters have each condition in each status,
// each cluster's conditions (for a per-cluster view), and how long clusters take from creation to first availability.
type metrics struct {
	conditions        *observe.Conditions
	createToAvailable prometheus.Histogram
	pushConsumers     prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		conditions: observe.NewConditions(prometheus.GaugeOpts{
			Name: "hostplane_clusters",
			Help: "Clusters by condition type and status.",
		}, prometheus.GaugeOpts{
			Name: "hostplane_cluster_condition",
			Help: "1 for the status each condition of the cluster has, 0 for the other two (True, False, Unknown).",
		}, "cluster"),
		createToAvailable: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hostplane_cluster_create_to_available_seconds",
			Help:    "Time from a cluster's creation to its first Available=True.",
			Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}),
		pushConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nats_push_consumers_deleted_total",
			Help: "Push consumers of the events stream the consumer auditor deleted (natsauth.ConsumerAuditor): someone made one with a deliver subject of its choosing.",
		}),
	}
}

// register adds the series to reg; a registry that has them already (an embedding process
// restarting clusterd) keeps the existing ones, which m then uses.
func (m *metrics) register(reg prometheus.Registerer) error {
	r := observe.NewRegistrar(reg)
	m.conditions = observe.Add(r, m.conditions)
	m.createToAvailable = observe.Add(r, m.createToAvailable)
	m.pushConsumers = observe.Add(r, m.pushConsumers)
	return r.Err()
}

func (m *metrics) set(cluster string, conds api.Conditions) {
	m.conditions.Set(cluster, conds, cluster)
}

func (m *metrics) forget(cluster string) { m.conditions.Forget(cluster) }
