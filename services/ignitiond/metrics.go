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
	OutcomeError         = "error"
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
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "GET /ignition requests by outcome: served, unauthorized, invalid_config (the rendered config failed validation), error.",
		}, []string{"outcome"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPayloadCache,
			Help: "Ignition payload cache lookups by result (hit, miss).",
		}, []string{"result"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricTokens,
			Help: "Bearer tokens presented to GET /ignition by outcome: current, previous (within its grace), expired, unknown, malformed.",
		}, []string{"outcome"}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricTokenRotations,
			Help: "Tokens rotated at half their lifetime (the config hash unchanged).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time to answer GET /ignition.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
		}),
		listeners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricListeners,
			Help: "Open HTTPS Ignition listeners (one per cluster).",
		}),
	}
	var err error
	if m.requests, err = observe.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.cache, err = observe.Register(reg, m.cache); err != nil {
		return nil, err
	}
	if m.tokens, err = observe.Register(reg, m.tokens); err != nil {
		return nil, err
	}
	if m.rotations, err = observe.Register(reg, m.rotations); err != nil {
		return nil, err
	}
	if m.duration, err = observe.Register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.listeners, err = observe.Register(reg, m.listeners); err != nil {
		return nil, err
	}
	// Every outcome is exported from the start, at zero, so rates have a series before the
	// first machine asks.
	for _, o := range []string{OutcomeServed, OutcomeUnauthorized, OutcomeInvalidConfig, OutcomeError} {
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
