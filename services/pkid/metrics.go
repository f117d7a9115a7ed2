package pkid

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
)

// metrics are pkid's own series. Certificate expiry is computed at scrape time from the
// NotAfter of every certificate pkid last saw, so it never goes stale between reconciles.
type metrics struct {
	expiryDesc       *prometheus.Desc
	nextRotationDesc *prometheus.Desc
	rotations        *prometheus.CounterVec
	csrs             *prometheus.CounterVec
	approvers        prometheus.Gauge
	kubeconfigs      prometheus.Counter

	mu           sync.Mutex
	notAfter     map[string]map[string]time.Time // cluster → cert → NotAfter
	nextRotation map[string]time.Time            // cluster → ClusterPKI.NextRotation (none if zero)
}

func newMetrics() *metrics {
	m := &metrics{
		expiryDesc: prometheus.NewDesc("hostplane_pki_cert_expiry_seconds",
			"Seconds until the certificate's NotAfter (negative once expired).",
			[]string{"cluster", "cert"}, nil),
		nextRotationDesc: prometheus.NewDesc("hostplane_pki_next_rotation_timestamp_seconds",
			"When the cluster's earliest leaf certificate is due for renewal (Unix time; RenewFraction of its lifetime). pkid renews it then, so a value in the past means a renewal is overdue.",
			[]string{"cluster"}, nil),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostplane_pki_rotations_total",
			Help: "Times a cluster's PKI changed after its first issuance (renewals, reissues, requested rotations).",
		}, []string{"cluster"}),
		notAfter:     map[string]map[string]time.Time{},
		nextRotation: map[string]time.Time{},
	}
	m.csrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_pkid_csr_decisions_total",
		Help: "Kubelet CSR decisions of guest clusters, once per CSR and outcome; every outcome but approved leaves the CSR pending.",
	}, []string{"outcome"})
	for _, o := range outcomes {
		m.csrs.WithLabelValues(o)
	}
	m.approvers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hostplane_pkid_csr_approvers",
		Help: "Guest clusters whose kubelet CSRs pkid watches (one informer each; none while a cluster hibernates).",
	})
	m.kubeconfigs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hostplane_pkid_kubeconfigs_issued_total",
		Help: "Kubeconfigs issued to requesters (POST /v1/clusters/{c}/kubeconfigs): each a short-lived client certificate of its own.",
	})
	return m
}

// register adds the series to reg; registering the same metrics again (a second Run) is a no-op.
func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m, m.rotations, m.csrs, m.approvers, m.kubeconfigs} {
		if err := reg.Register(c); err != nil {
			if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok && are.ExistingCollector == c {
				continue
			}
			return err
		}
	}
	return nil
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.expiryDesc
	ch <- m.nextRotationDesc
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for cluster, certs := range m.notAfter {
		for name, na := range certs {
			ch <- prometheus.MustNewConstMetric(m.expiryDesc, prometheus.GaugeValue, na.Sub(now).Seconds(), cluster, name)
		}
	}
	for cluster, at := range m.nextRotation {
		ch <- prometheus.MustNewConstMetric(m.nextRotationDesc, prometheus.GaugeValue, float64(at.UnixMilli())/1e3, cluster)
	}
}

// observe records the expiry of every certificate of p.
func (m *metrics) observe(cluster string, p *api.ClusterPKI) {
	certs := make(map[string]time.Time, len(p.Certs))
	for name, b := range p.Certs {
		certs[name] = b.NotAfter
	}
	m.mu.Lock()
	m.notAfter[cluster] = certs
	if p.NextRotation.IsZero() { // no leaf is ever due (every one capped at its CA)
		delete(m.nextRotation, cluster)
	} else {
		m.nextRotation[cluster] = p.NextRotation
	}
	m.mu.Unlock()
	m.rotations.WithLabelValues(cluster) // exported at zero before the first rotation
}

// rotated counts one rotation of cluster's PKI.
func (m *metrics) rotated(cluster string) { m.rotations.WithLabelValues(cluster).Inc() }

// csrDecided counts one CSR decision.
func (m *metrics) csrDecided(outcome string) { m.csrs.WithLabelValues(outcome).Inc() }

// forget drops a deleted cluster's series.
func (m *metrics) forget(cluster string) {
	m.mu.Lock()
	delete(m.notAfter, cluster)
	delete(m.nextRotation, cluster)
	m.mu.Unlock()
	m.rotations.DeleteLabelValues(cluster)
}

var _ prometheus.Collector = (*metrics)(nil)
