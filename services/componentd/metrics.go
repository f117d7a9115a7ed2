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

	backups        *prometheus.CounterVec
	backupDuration *prometheus.HistogramVec
	backupLast     *prometheus.GaugeVec
	backupSize     *prometheus.GaugeVec

	addons         *prometheus.CounterVec
	addonsDuration prometheus.Histogram
}

// Results of applying a cluster's guest addons: label values of
// hostplane_componentd_addon_applies_total.
const (
	addonsApplied = "applied"
	addonsFailed  = "failed"
	addonsInvalid = "invalid"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := obs.NewRegistrar(reg)
	available := obs.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_component_available",
		Help: "1 when the control-plane component is Available, else 0.",
	}, []string{"cluster", "component"}))
	rollout := obs.Add(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hostplane_component_rollout_duration_seconds",
		Help:    "Time from a component's config hash changing (or its creation) to every replica ready at it.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"component"}))
	restarts := obs.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_component_restarts_total",
		Help: "Times a control-plane process exited and was restarted by the supervisor.",
	}, []string{"cluster", "component"}))
	replicas := obs.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_component_replicas",
		Help: "Replicas of the control-plane component by state: desired, ready, updated (ready at the component's current version and config hash; updated/desired is the rollout's progress).",
	}, []string{"cluster", "component", "state"}))
	backups := obs.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_etcd_backups_total",
		Help: "etcd backups componentd finished, by result (succeeded, failed) and trigger (ondemand, scheduled).",
	}, []string{"cluster", "result", "trigger"}))
	backupDuration := obs.Add(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hostplane_etcd_backup_duration_seconds",
		Help:    "Time to take an etcd snapshot and store it in the object store.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120},
	}, []string{"cluster"}))
	backupLast := obs.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_etcd_backup_last_success_timestamp_seconds",
		Help: "Unix time of the cluster's last etcd backup that completed (0: none since componentd started).",
	}, []string{"cluster"}))
	backupSize := obs.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostplane_etcd_backup_size_bytes",
		Help: "Size of the cluster's last completed etcd snapshot.",
	}, []string{"cluster"}))
	addons := obs.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_componentd_addon_applies_total",
		Help: "Applications of a real-node cluster's guest addons (CoreDNS, the kubernetes Service's endpoints), by result (applied, failed: the guest API refused or did not answer, invalid: the cluster's endpoint or service CIDR cannot carry them).",
	}, []string{"result"}))
	addonsDuration := obs.Add(r, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hostplane_componentd_addon_apply_duration_seconds",
		Help:    "Time to apply a cluster's guest addons that were applied.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15},
	}))
	if err := r.Err(); err != nil {
		return nil, err
	}
	for _, res := range []string{addonsApplied, addonsFailed, addonsInvalid} {
		addons.WithLabelValues(res)
	}
	// Every component's rollout histogram is exported at zero from the start: a series born at
	// its first observation never shows that observation in a rate.
	for _, c := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter} {
		rollout.WithLabelValues(c)
	}
	return &metrics{available: available, rollout: rollout, restarts: restarts, replicas: replicas,
		backups: backups, backupDuration: backupDuration, backupLast: backupLast, backupSize: backupSize,
		addons: addons, addonsDuration: addonsDuration}, nil
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
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.available, m.restarts, m.replicas, m.backups, m.backupDuration, m.backupLast, m.backupSize} {
		v.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	}
}

// Backup triggers and results: label values of hostplane_etcd_backups_total.
const (
	triggerOnDemand  = "ondemand"
	triggerScheduled = "scheduled"
	resultSucceeded  = "succeeded"
	resultFailed     = "failed"
)

// exportBackups exports the cluster's backup series at zero, so a dashboard shows the
// cluster before its first backup and a rate sees the first one.
func (m *metrics) exportBackups(cluster string) {
	for _, r := range []string{resultSucceeded, resultFailed} {
		for _, t := range []string{triggerOnDemand, triggerScheduled} {
			m.backups.WithLabelValues(cluster, r, t)
		}
	}
	m.backupLast.WithLabelValues(cluster)
}

// observeBackup counts a finished backup.
func (m *metrics) observeBackup(b *api.Backup, seconds float64) {
	trigger := triggerOnDemand
	if b.Spec.Scheduled {
		trigger = triggerScheduled
	}
	result := resultFailed
	if b.IsComplete() {
		result = resultSucceeded
		m.backupDuration.WithLabelValues(b.Cluster).Observe(seconds)
		if t := b.Status.CompletionTime; t != nil {
			m.backupLast.WithLabelValues(b.Cluster).Set(float64(t.Unix()))
		}
		m.backupSize.WithLabelValues(b.Cluster).Set(float64(b.Status.SizeBytes))
	}
	m.backups.WithLabelValues(b.Cluster, result, trigger).Inc()
}
