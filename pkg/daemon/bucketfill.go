package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Names of the bucket fill metrics (docs/operations.md, HostplaneStoreFilling).
const (
	MetricBucketBytes    = "hostplane_nats_bucket_bytes"
	MetricBucketMaxBytes = "hostplane_nats_bucket_max_bytes"
)

// bucketFillTimeout bounds the status request of one bucket at scrape time.
const bucketFillTimeout = 2 * time.Second

// bucketFill reports, at scrape time, how many bytes each of the daemon's own buckets holds
// and may hold (its MaxBytes; the store refuses new keys at store.CreateLimit of it).
type bucketFill struct {
	bytes, max *prometheus.Desc

	mu      sync.Mutex
	buckets map[string]jetstream.KeyValue
}

func registerBucketFill(reg prometheus.Registerer, buckets map[string]jetstream.KeyValue) error {
	r := observe.NewRegistrar(reg)
	f := observe.Add(r, &bucketFill{
		bytes: prometheus.NewDesc(MetricBucketBytes, "Bytes the daemon's KV bucket holds (every revision kept).", []string{"bucket"}, nil),
		max:   prometheus.NewDesc(MetricBucketMaxBytes, "Bytes the daemon's KV bucket may hold (its MaxBytes); new keys are refused from 80% of it.", []string{"bucket"}, nil),
	})
	f.mu.Lock()
	f.buckets = buckets // f may be the collector registered before (the daemon run again in-process)
	f.mu.Unlock()
	return r.Err()
}

// Describe implements prometheus.Collector.
func (f *bucketFill) Describe(ch chan<- *prometheus.Desc) {
	ch <- f.bytes
	ch <- f.max
}

// Collect implements prometheus.Collector: a bucket whose status NATS does not give in time
// yields no series.
func (f *bucketFill) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	names := make([]string, 0, len(f.buckets))
	for n := range f.buckets {
		names = append(names, n)
	}
	buckets := f.buckets
	f.mu.Unlock()
	slices.Sort(names)
	ctx, cancel := context.WithTimeout(context.Background(), bucketFillTimeout)
	defer cancel()
	for _, n := range names {
		st, err := buckets[n].Status(ctx)
		if err != nil {
			continue
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(f.bytes, prometheus.GaugeValue, float64(bs.Bytes()), n)
		if m := bs.StreamInfo().Config.MaxBytes; m > 0 {
			ch <- prometheus.MustNewConstMetric(f.max, prometheus.GaugeValue, float64(m), n)
		}
	}
}

var _ prometheus.Collector = (*bucketFill)(nil)
