package daemon_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// The daemon's /metrics say how full each of its buckets is and may be, so that an operator
// hears of a bucket filling up (HostplaneStoreFilling) before writes are refused.
func TestDaemon_Metrics_SayHowFullItsBucketsAre(t *testing.T) {
	n := testenv.NATS(t)
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), InsecureNoAuth: true,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Registry: reg,
	}, daemon.Spec{Name: "testd", Buckets: []string{bus.BucketClusters}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	kv, err := n.JS.KeyValue(context.Background(), bus.BucketClusters)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "demo", make([]byte, 2000)); err != nil {
		t.Fatal(err)
	}
	const limit = 64 << 20 // an operator's limit
	st, err := n.JS.Stream(context.Background(), "KV_"+bus.BucketClusters)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxBytes = limit
	if _, err := n.JS.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) (float64, bool) {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if label(m, "bucket") == bus.BucketClusters {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		b, ok := gauge(daemon.MetricBucketBytes)
		return ok && b >= 2000
	}, "%s{bucket=%q} never showed the 2000 bytes written", daemon.MetricBucketBytes, bus.BucketClusters)
	if m, ok := gauge(daemon.MetricBucketMaxBytes); !ok || m != limit {
		t.Errorf("%s = %v, %v; want the bucket's limit %d", daemon.MetricBucketMaxBytes, m, ok, limit)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
