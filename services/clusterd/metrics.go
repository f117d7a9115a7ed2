package clusterd

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
)

// metrics are clusterd's own series: how many clusters have each condition in each status,
// each cluster's conditions (for a per-cluster view), and how long clusters take from creation to first availability.
type metrics struct {
	mu         sync.Mutex
	conditions map[string]api.Conditions // by cluster

	clustersDesc      *prometheus.Desc
	conditionDesc     *prometheus.Desc
	createToAvailable prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		conditions: map[string]api.Conditions{},
		clustersDesc: prometheus.NewDesc("hostplane_clusters",
			"Clusters by condition type and status.", []string{"condition", "status"}, nil),
		conditionDesc: prometheus.NewDesc("hostplane_cluster_condition",
			"1 for the status each condition of the cluster has, 0 for the other two (True, False, Unknown).",
			[]string{"cluster", "condition", "status"}, nil),
		createToAvailable: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hostplane_cluster_create_to_available_seconds",
			Help:    "Time from a cluster's creation to its first Available=True.",
			Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}),
	}
}

// register adds the series to reg; a registry that has them already (an embedding process
// restarting clusterd) keeps the existing ones.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m, m.createToAvailable} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if h, ok := are.ExistingCollector.(prometheus.Histogram); ok {
					m.createToAvailable = h
				}
				continue
			}
			return err
		}
	}
	return nil
}

func (m *metrics) set(cluster string, conds api.Conditions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions[cluster] = append(api.Conditions(nil), conds...)
}

func (m *metrics) forget(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conditions, cluster)
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.clustersDesc
	ch <- m.conditionDesc
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	type key struct{ condition, status string }
	counts := map[key]int{}
	m.mu.Lock()
	for cluster, conds := range m.conditions {
		for _, c := range conds {
			for _, s := range []api.ConditionStatus{api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown} {
				v := 0.0
				if c.Status == s {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(m.conditionDesc, prometheus.GaugeValue, v, cluster, c.Type, string(s))
			}
			// Every status of a condition type in use is reported, zero included, so a
			// series does not vanish when its last cluster moves on.
			for _, s := range []api.ConditionStatus{api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown} {
				counts[key{c.Type, string(s)}] += 0
			}
			counts[key{c.Type, string(c.Status)}]++
		}
	}
	m.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.clustersDesc, prometheus.GaugeValue, float64(n), k.condition, k.status)
	}
}

var _ prometheus.Collector = (*metrics)(nil)
