package reconcile

import (
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

type metrics struct {
	duration prometheus.ObserverVec
	total    *prometheus.CounterVec
	errors   prometheus.Counter
	received prometheus.Counter
	rejected *prometheus.CounterVec
	resyncs  prometheus.Counter
}

// newMetrics registers the controller's series, and the lag of its consumer when it has a
// JetStream. Several controllers may share a registry: the collectors are shared and told
// apart by the "controller" label.
func newMetrics(cfg Config, depth func() int, js jetstream.JetStream) (*metrics, error) {
	l := prometheus.Labels{"controller": cfg.Name}
	r := observe.NewRegistrar(cfg.Registry)
	duration := observe.Add(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hostplane_reconcile_duration_seconds",
		Help:    "Time one reconcile of a key took, by result (success, requeue, error).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
	}, []string{"controller", "result"}))
	total := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_reconcile_total",
		Help: "Reconciles run, by result (success, requeue, error).",
	}, []string{"controller", "result"}))
	errs := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_reconcile_errors_total",
		Help: "Reconciles that returned an error (each is retried with backoff).",
	}, []string{"controller"}))
	received := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_events_received_total",
		Help: "Messages delivered by the controller's durable consumer.",
	}, []string{"controller"}))
	rejected := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_events_rejected_total",
		Help: "Malformed messages terminated without reconciling, by reason (envelope, subject).",
	}, []string{"controller", "reason"}))
	resyncs := observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostplane_reconcile_resyncs_total",
		Help: "Periodic resyncs that enqueued every owned key.",
	}, []string{"controller"}))
	registerDepth(r, cfg.Name, depth)
	if js != nil {
		registerLag(r, js, cfg)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	m := &metrics{
		duration: duration.MustCurryWith(l),
		total:    total.MustCurryWith(l),
		errors:   errs.With(l),
		received: received.With(l),
		rejected: rejected.MustCurryWith(l),
		resyncs:  resyncs.With(l),
	}
	// Every result and rejection reason is exported from the start, at zero, so rates and
	// dashboards have a series before the first error.
	for _, result := range []string{"success", "requeue", "error"} {
		m.duration.WithLabelValues(result)
		m.total.WithLabelValues(result)
	}
	for _, reason := range []string{"envelope", "subject"} {
		m.rejected.WithLabelValues(reason)
	}
	return m, nil
}

func (m *metrics) observe(result string, seconds float64) {
	m.duration.WithLabelValues(result).Observe(seconds)
	m.total.WithLabelValues(result).Inc()
	if result == "error" {
		m.errors.Inc()
	}
}

// depthGauge reports the controller's queue length at scrape time. A controller created again
// with the same registry (a daemon run again in-process) takes the existing gauge over.
type depthGauge struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	depth func() int
}

func registerDepth(r *observe.Registrar, name string, depth func() int) {
	g := observe.Add(r, &depthGauge{
		desc: prometheus.NewDesc("hostplane_reconcile_queue_depth", "Keys waiting to be reconciled.",
			nil, prometheus.Labels{"controller": name}),
		depth: depth,
	})
	g.mu.Lock()
	g.depth = depth // g may be the gauge registered before
	g.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (g *depthGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *depthGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	depth := g.depth
	g.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(depth()))
}
