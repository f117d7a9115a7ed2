package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Names of the consumer lag metrics.
const (
	MetricConsumerPending    = "hostplane_nats_consumer_pending"
	MetricConsumerAckPending = "hostplane_nats_consumer_ack_pending"
	MetricConsumerRedeliver  = "hostplane_nats_consumer_redelivered"
)

// LagScrapeTimeout bounds the consumer info request one scrape makes per controller. A scrape
// that times out (NATS unreachable) reports no lag series rather than a stale value.
const LagScrapeTimeout = 2 * time.Second

// lagCollector reports, at scrape time, how far the controller's durable consumer is behind
// its stream: messages not yet delivered (NumPending), delivered but not yet acknowledged
// (NumAckPending: waiting for their key's reconcile) and redelivered. One consumer info
// request per scrape; a scrape never waits longer than LagScrapeTimeout for it.
type lagCollector struct {
	pending, ackPending, redelivered *prometheus.Desc

	mu      sync.Mutex
	js      jetstream.JetStream
	stream  string
	durable string
}

// registerLag registers the lag series of one controller with r. A registry that already
// holds them (the daemon run again in-process) keeps its collector, which then reads the new
// controller's consumer.
func registerLag(r *observe.Registrar, js jetstream.JetStream, cfg Config) {
	labels := prometheus.Labels{"controller": cfg.Name, "stream": cfg.Stream, "consumer": cfg.Durable}
	l := observe.Add(r, &lagCollector{
		pending: prometheus.NewDesc(MetricConsumerPending,
			"Messages of the stream matching the controller's durable consumer not yet delivered to it.", nil, labels),
		ackPending: prometheus.NewDesc(MetricConsumerAckPending,
			"Messages delivered to the controller's durable consumer and not yet acknowledged (waiting for their key's reconcile).", nil, labels),
		redelivered: prometheus.NewDesc(MetricConsumerRedeliver,
			"Messages of the controller's durable consumer redelivered at least once and not yet acknowledged.", nil, labels),
		js: js, stream: cfg.Stream, durable: cfg.Durable,
	})
	l.mu.Lock()
	l.js = js // l may be the collector registered before
	l.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.pending
	ch <- l.ackPending
	ch <- l.redelivered
}

// Collect implements prometheus.Collector. A consumer that does not exist yet (the controller
// has not started) or a NATS that does not answer in time yields no series.
func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	js := l.js
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), LagScrapeTimeout)
	defer cancel()
	cons, err := js.Consumer(ctx, l.stream, l.durable)
	if err != nil {
		return
	}
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(l.pending, prometheus.GaugeValue, float64(info.NumPending))
	ch <- prometheus.MustNewConstMetric(l.ackPending, prometheus.GaugeValue, float64(info.NumAckPending))
	ch <- prometheus.MustNewConstMetric(l.redelivered, prometheus.GaugeValue, float64(info.NumRedelivered))
}

var _ prometheus.Collector = (*lagCollector)(nil)
