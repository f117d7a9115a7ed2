package nodepoold

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

// metrics are nodepoold's own series: how many pools have each condition in each status, each
// pool's conditions and machine counts (rollout progress: updated of desired), and the in-place
// updates started and finished.
type metrics struct {
	mu         sync.Mutex
	conditions map[string]api.Conditions // by pool key
	pools      map[string]poolSeries     // by pool key

	poolsDesc       *prometheus.Desc
	conditionDesc   *prometheus.Desc
	replicasDesc    *prometheus.Desc
	inPlaceStarted  prometheus.Counter
	inPlaceFinished prometheus.Counter
	// scaled counts the autoscaler's changes of autoscaled pools' sizes, by direction.
	scaled *prometheus.CounterVec
	// managementRebuilds counts restarts of the management manager (Cluster API's
	// controllers and their caches) after the management apiserver came back.
	managementRebuilds prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		conditions: map[string]api.Conditions{},
		pools:      map[string]poolSeries{},
		poolsDesc: prometheus.NewDesc("hostplane_nodepools",
			"Node pools by condition type and status.", []string{"condition", "status"}, nil),
		conditionDesc: prometheus.NewDesc("hostplane_nodepool_condition",
			"1 for the status each condition of the node pool has, 0 for the other two (True, False, Unknown).",
			[]string{"cluster", "nodepool", "condition", "status"}, nil),
		replicasDesc: prometheus.NewDesc("hostplane_nodepool_replicas",
			"Machines of the node pool by state: desired (spec.replicas, or the current size when autoscaled), current (existing machines), ready (with a Ready node), updated (running the pool's current config hash and release).",
			[]string{"cluster", "nodepool", "state"}, nil),
		inPlaceStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nodepool_inplace_updates_started_total",
			Help: "Machines of InPlace node pools cordoned and drained for a new config.",
		}),
		inPlaceFinished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nodepool_inplace_updates_finished_total",
			Help: "Machines of InPlace node pools that applied a new config and were uncordoned.",
		}),
		scaled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostplane_nodepool_autoscaler_scales_total",
			Help: "Changes of an autoscaled node pool's size by the autoscaler, as nodepoold saw them (status.autoscaling.lastScale), by direction (up, down).",
		}, []string{"cluster", "nodepool", "direction"}),
		managementRebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostplane_nodepoold_management_rebuilds_total",
			Help: "Restarts of Cluster API's controllers and the management caches after the management apiserver went away and came back.",
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
	if m.inPlaceFinished, err = observe.Register(reg, m.inPlaceFinished); err != nil {
		return err
	}
	if m.scaled, err = observe.Register(reg, m.scaled); err != nil {
		return err
	}
	m.managementRebuilds, err = observe.Register(reg, m.managementRebuilds)
	return err
}

// scale counts one change of an autoscaled pool's size.
func (m *metrics) scale(cluster, pool string, ev api.ScaleEvent) {
	dir := "up"
	if ev.To < ev.From {
		dir = "down"
	}
	m.scaled.WithLabelValues(cluster, pool, dir).Inc()
}

// poolSeries is what the per-pool series report of one pool.
type poolSeries struct {
	cluster, name                    string
	conditions                       api.Conditions
	desired, current, ready, updated int32
}

func (m *metrics) set(key string, conds api.Conditions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions[key] = append(api.Conditions(nil), conds...)
}

// observe records the pool's conditions and machine counts for the per-pool series.
func (m *metrics) observe(np *api.NodePool) {
	pc := poolSeries{
		cluster: np.Cluster, name: np.Name,
		conditions: append(api.Conditions(nil), np.Status.Conditions...),
		current:    np.Status.Replicas, ready: np.Status.ReadyReplicas, updated: np.Status.UpdatedReplicas,
	}
	switch {
	case np.Name == api.AutoNodePoolName: // Karpenter sizes it: one machine per NodeClaim
		pc.desired = np.Status.Replicas
	case np.Spec.Replicas != nil:
		pc.desired = *np.Spec.Replicas
	case np.Spec.AutoScaling != nil:
		pc.desired = np.Status.Replicas
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pools[api.NodePoolKey(np.Cluster, np.Name)] = pc
}

func (m *metrics) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conditions, key)
	delete(m.pools, key)
	if cluster, pool, ok := api.SplitPartKey(key); ok {
		m.scaled.DeletePartialMatch(prometheus.Labels{"cluster": cluster, "nodepool": pool})
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.poolsDesc
	ch <- m.conditionDesc
	ch <- m.replicasDesc
}

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
	pools := make([]poolSeries, 0, len(m.pools))
	for _, pc := range m.pools {
		pools = append(pools, pc)
	}
	m.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.poolsDesc, prometheus.GaugeValue, float64(n), k.condition, k.status)
	}
	for _, pc := range pools {
		for _, c := range pc.conditions {
			for _, s := range []api.ConditionStatus{api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown} {
				v := 0.0
				if c.Status == s {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(m.conditionDesc, prometheus.GaugeValue, v, pc.cluster, pc.name, c.Type, string(s))
			}
		}
		for state, n := range map[string]int32{"desired": pc.desired, "current": pc.current, "ready": pc.ready, "updated": pc.updated} {
			ch <- prometheus.MustNewConstMetric(m.replicasDesc, prometheus.GaugeValue, float64(n), pc.cluster, pc.name, state)
		}
	}
}

var _ prometheus.Collector = (*metrics)(nil)
