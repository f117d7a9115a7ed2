package provider

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Metric names (deploy/grafana and deploy/prometheus use them).
const (
	MetricMachines                 = "hostplane_infrad_machines"
	MetricMachineProvisioning      = "hostplane_infrad_machine_provisioning_seconds"
	MetricMachineCreateToNodeReady = "hostplane_infrad_machine_create_to_node_ready_seconds"
	MetricLocalCloudErrors         = "hostplane_infrad_localcloud_errors_total"
)

// Metrics are the machines' series. infrad registers them whether or not it runs a provider,
// so the local cloud's error counters are exported at zero from the start.
type Metrics struct {
	machines          *prometheus.GaugeVec
	provisioning      prometheus.Histogram
	createToNodeReady prometheus.Histogram
	cloudErrors       *prometheus.CounterVec
}

// NewMetrics registers the machines' metrics with reg (or finds them registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := observe.NewRegistrar(reg)
	m := &Metrics{
		machines: observe.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricMachines,
			Help: "LocalMachines by cluster and phase: Pending, Booting, Running, Failed, Stopped, Missing (provisioned, gone from the cloud) or Deleting.",
		}, []string{"cluster", "phase"})),
		provisioning: observe.Add(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricMachineProvisioning,
			Help:    "Seconds from a LocalMachine's creation to its machine's creation in the local cloud (spec.providerID and status.initialization.provisioned set).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		})),
		createToNodeReady: observe.Add(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricMachineCreateToNodeReady,
			Help:    "Seconds from a Cluster API Machine's creation to its cloud machine running with a Ready node (machine.joined).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		})),
		cloudErrors: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLocalCloudErrors,
			Help: "Local cloud calls that failed, by operation (create, get, list, delete, fault, reconfigure).",
		}, []string{"op"})),
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	for _, op := range []string{"create", "get", "list", "delete", "fault", "reconfigure"} {
		m.cloudErrors.WithLabelValues(op) // exported at zero from the start
	}
	return m, nil
}

// phaseGauge keeps the machines gauge: the phase of every LocalMachine this infrad reconciled.
type phaseGauge struct {
	gauge *prometheus.GaugeVec
	mu    sync.Mutex
	of    map[types.NamespacedName][2]string // LocalMachine → {cluster, phase}
}

func newPhaseGauge(g *prometheus.GaugeVec) *phaseGauge {
	return &phaseGauge{gauge: g, of: map[types.NamespacedName][2]string{}}
}

// set records lm's phase.
func (g *phaseGauge) set(lm *infrav1.LocalMachine, cluster, phase string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	nn := types.NamespacedName{Namespace: lm.Namespace, Name: lm.Name}
	old, had := g.of[nn]
	g.of[nn] = [2]string{cluster, phase}
	if had {
		g.count(old[0])
	}
	g.count(cluster)
}

// forget drops a LocalMachine that is gone.
func (g *phaseGauge) forget(nn types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, had := g.of[nn]; had {
		delete(g.of, nn)
		g.count(old[0])
	}
}

// count sets the cluster's series from the recorded phases (a phase with none left is
// removed, and so is a cluster with no machine).
func (g *phaseGauge) count(cluster string) {
	n := map[string]int{}
	for _, v := range g.of {
		if v[0] == cluster {
			n[v[1]]++
		}
	}
	g.gauge.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	for phase, c := range n {
		g.gauge.WithLabelValues(cluster, phase).Set(float64(c))
	}
}
