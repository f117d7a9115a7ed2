package nodepoold

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

// metrics are nodepoold's own series: how many pools have each condition in each status, and
// the in-place updates started and finished.
type metrics struct {
	mu         sync.Mutex
	conditions map[string]api.Conditions // by pool key

	poolsDesc       *prometheus.Desc
	inPlaceStarted  prometheus.Counter
	inPlaceFinished prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		conditions: map[string]api.Conditions{},
		poolsDesc: prometheus.NewDesc("hostplane_nodepools",
			"Node pools by condition type and status.", []string{"condition", "status"}, nil),
		inPlaceStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nodepool_inplace_updates_started_total",
			Help: "Machines of InPlace node pools cordoned and drained for a new config.",
		}),
		inPlaceFinished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nodepool_inplace_updates_finished_total",
			Help: "Machines of InPlace node pools that applied a new config and were uncordoned.",
		}),
	}
}

// register adds the series to reg (reusing those an earlier nodepoold of the process registered).
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	var err error
	if _, err = observe.Register[prometheus.Collector](reg, m); err != nil {
		return err
	}
	if m.inPlaceStarted, err = observe.Register(reg, m.inPlaceStarted); err != nil {
		return err
	}
	m.inPlaceFinished, err = observe.Register(reg, m.inPlaceFinished)
	return err
}

func (m *metrics) set(key string, conds api.Conditions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions[key] = append(api.Conditions(nil), conds...)
}

func (m *metrics) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conditions, key)
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.poolsDesc }

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	type key struct{ condition, status string }
	counts := map[key]int{}
	m.mu.Lock()
	for _, conds := range m.conditions {
		for _, c := range conds {
			for _, s := range []api.ConditionStatus{api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown} {
				counts[key{c.Type, string(s)}] += 0
			}
			counts[key{c.Type, string(c.Status)}]++
		}
	}
	m.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.poolsDesc, prometheus.GaugeValue, float64(n), k.condition, k.status)
	}
}

var _ prometheus.Collector = (*metrics)(nil)
