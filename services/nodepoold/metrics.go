package nodepoold

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

// metrics are nodepoold's own series: how many pools have each condition in each status, each
// pool's conditions and machine counts (rollout progress: updated of desired), and the in-place
// updates started and finished.
type metrics struct {
	conditions      *observe.Conditions
	replicas        *prometheus.GaugeVec
	inPlaceStarted  prometheus.Counter
	inPlaceFinished prometheus.Counter
	// scaled counts the autoscaler's changes of autoscaled pools' sizes, by direction.
	scaled *prometheus.CounterVec
	// managementRebuilds counts restarts of the management manager (Cluster API's
	// controllers and their caches) after the management apiserver came back.
	managementRebuilds prometheus.Counter
	// guestNodeInformers is how many guest clusters' Nodes nodepoold watches.
	guestNodeInformers prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		conditions: observe.NewConditions(prometheus.GaugeOpts{
			Name: "hostplane_nodepools",
			Help: "Node pools by condition type and status.",
		}, prometheus.GaugeOpts{
			Name: "hostplane_nodepool_condition",
			Help: "1 for the status each condition of the node pool has, 0 for the other two (True, False, Unknown).",
		}, "cluster", "nodepool"),
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hostplane_nodepool_replicas",
			Help: "Machines of the node pool by state: desired (spec.replicas, or the current size when autoscaled), current (existing machines), ready (with a Ready node), updated (running the pool's current config hash and release).",
		}, []string{"cluster", "nodepool", "state"}),
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
		guestNodeInformers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hostplane_nodepoold_guest_node_informers",
			Help: "Guest clusters whose Nodes nodepoold watches (one informer each; none while a cluster hibernates or has no pool).",
		}),
	}
}

// register adds the series to reg (reusing those an earlier nodepoold of the process registered).
func (m *metrics) register(reg prometheus.Registerer) error {
	r := observe.NewRegistrar(reg)
	m.conditions = observe.Add(r, m.conditions)
	m.replicas = observe.Add(r, m.replicas)
	m.inPlaceStarted = observe.Add(r, m.inPlaceStarted)
	m.inPlaceFinished = observe.Add(r, m.inPlaceFinished)
	m.scaled = observe.Add(r, m.scaled)
	m.managementRebuilds = observe.Add(r, m.managementRebuilds)
	m.guestNodeInformers = observe.Add(r, m.guestNodeInformers)
	return r.Err()
}

// nodeInformers sets the number of guest Node informers.
func (m *metrics) nodeInformers(n int) { m.guestNodeInformers.Set(float64(n)) }

// scale counts one change of an autoscaled pool's size.
func (m *metrics) scale(cluster, pool string, ev api.ScaleEvent) {
	dir := "up"
	if ev.To < ev.From {
		dir = "down"
	}
	m.scaled.WithLabelValues(cluster, pool, dir).Inc()
}

// observe records the pool's conditions and machine counts for the per-pool series.
func (m *metrics) observe(np *api.NodePool) {
	m.conditions.Set(api.NodePoolKey(np.Cluster, np.Name), np.Status.Conditions, np.Cluster, np.Name)
	var desired int32
	switch {
	case np.Name == api.AutoNodePoolName: // Karpenter sizes it: one machine per NodeClaim
		desired = np.Status.Replicas
	case np.Spec.Replicas != nil:
		desired = *np.Spec.Replicas
	case np.Spec.AutoScaling != nil:
		desired = np.Status.Replicas
	}
	for state, n := range map[string]int32{"desired": desired, "current": np.Status.Replicas, "ready": np.Status.ReadyReplicas, "updated": np.Status.UpdatedReplicas} {
		m.replicas.WithLabelValues(np.Cluster, np.Name, state).Set(float64(n))
	}
}

func (m *metrics) forget(key string) {
	m.conditions.Forget(key)
	if cluster, pool, ok := api.SplitPartKey(key); ok {
		l := prometheus.Labels{"cluster": cluster, "nodepool": pool}
		m.replicas.DeletePartialMatch(l)
		m.scaled.DeletePartialMatch(l)
	}
}
