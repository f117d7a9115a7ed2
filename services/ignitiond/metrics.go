package ignitiond

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Metric names.
const (
	MetricRequests        = "hostplane_ignitiond_requests_total"
	MetricPayloadCache    = "hostplane_ignitiond_payload_cache_total"
	MetricTokens          = "hostplane_ignitiond_tokens_total"
	MetricTokenRotations  = "hostplane_ignitiond_token_rotations_total"
	MetricRequestDuration = "hostplane_ignitiond_request_duration_seconds"
	MetricListeners       = "hostplane_ignitiond_listeners"
)

// Outcomes of GET /ignition (label "outcome" of MetricRequests).
const (
	OutcomeServed        = "served"
	OutcomeUnauthorized  = "unauthorized"
	OutcomeInvalidConfig = "invalid_config"
	// OutcomeNotAcceptable: the machine's Ignition reads no spec version that expresses its
	// config (406).
	OutcomeNotAcceptable = "not_acceptable"
	// OutcomeNoNodeBinary: a real node's payload names a node binary (kubelet, kube-proxy)
	// this host has not built (503: Ignition asks again).
	OutcomeNoNodeBinary = "no_node_binary"
	OutcomeError        = "error"
)

// Token lookups (label "outcome" of MetricTokens).
const (
	TokenCurrent   = "current"
	TokenPrevious  = "previous"
	TokenExpired   = "expired"
	TokenUnknown   = "unknown"
	TokenMalformed = "malformed"
)

type metrics struct {
	requests  *prometheus.CounterVec
	cache     *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	rotations prometheus.Counter
	duration  prometheus.Histogram
	listeners prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := observe.NewRegistrar(reg)
	m := &metrics{
		requests: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "GET /ignition requests by outcome: served, unauthorized, invalid_config (the rendered config failed validation), error.",
		}, []string{"outcome"})),
		cache: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPayloadCache,
			Help: "Ignition payload cache lookups by result (hit, miss).",
		}, []string{"result"})),
		tokens: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricTokens,
			Help: "Bearer tokens presented to GET /ignition by outcome: current, previous (within its grace), expired, unknown, malformed.",
		}, []string{"outcome"})),
		rotations: observe.Add(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricTokenRotations,
			Help: "Tokens rotated at half their lifetime (the config hash unchanged).",
		})),
		duration: observe.Add(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time to answer GET /ignition.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
		})),
		listeners: observe.Add(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricListeners,
			Help: "Open HTTPS Ignition listeners (one per cluster).",
		})),
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	// Every outcome is exported from the start, at zero, so rates have a series before the
	// first machine asks.
	for _, o := range []string{OutcomeServed, OutcomeUnauthorized, OutcomeInvalidConfig, OutcomeNotAcceptable, OutcomeNoNodeBinary, OutcomeError} {
		m.requests.WithLabelValues(o)
	}
	for _, o := range []string{TokenCurrent, TokenPrevious, TokenExpired, TokenUnknown, TokenMalformed} {
		m.tokens.WithLabelValues(o)
	}
	for _, r := range []string{"hit", "miss"} {
		m.cache.WithLabelValues(r)
	}
	return m, nil
}
