package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// rates: events per second, and how many events each run publishes.
var rates = []struct {
	perSecond int
	events    int
}{{1, 10}, {100, 500}, {1000, 5000}}

// latencies collects publish → handler latencies keyed by an id.
type latencies struct {
	mu    sync.Mutex
	sent  map[string]time.Time
	got   []time.Duration
	total int
	done  chan struct{}
}

func newLatencies(n int) *latencies {
	return &latencies{sent: make(map[string]time.Time, n), total: n, done: make(chan struct{})}
}

func (l *latencies) send(id string) {
	l.mu.Lock()
	l.sent[id] = time.Now()
	l.mu.Unlock()
}

func (l *latencies) receive(id string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	t0, ok := l.sent[id]
	if !ok {
		return
	}
	delete(l.sent, id)
	l.got = append(l.got, now.Sub(t0))
	if len(l.got) == l.total {
		close(l.done)
	}
}

func (l *latencies) report(b *testing.B) {
	slices.Sort(l.got)
	q := func(p float64) float64 {
		return float64(l.got[int(p*float64(len(l.got)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// pace publishes n items at perSecond, calling publish(i).
func pace(b *testing.B, n, perSecond int, publish func(i int) error) {
	interval := time.Second / time.Duration(perSecond)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		if err := publish(i); err != nil {
			b.Fatal(err)
		}
	}
}

func wait(b *testing.B, l *latencies) {
	select {
	case <-l.done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("only %d of %d events arrived", len(l.got), l.total)
	}
}

// natsSecurity is how a benchmark's NATS server is secured.
type natsSecurity struct {
	name string
	// start returns JetStream for the controller and the publisher, each its own connection
	// as the identity clusterd (the daemon whose consumer and subjects the benchmark uses).
	start func(b *testing.B) (consumer, publisher jetstream.JetStream)
}

// securities: the server without TLS or authentication (anyone may connect and do anything),
// with nkey identities and permissions (testenv.NATS: what the tests use), and with TLS on
// top of them (what hostplane dev, compose and deploy/k8s run).
var securities = []natsSecurity{
	{"plain", func(b *testing.B) (jetstream.JetStream, jetstream.JetStream) {
		srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Stop)
		_, cjs := testenv.Connect(b, srv.URL())
		_, pjs := testenv.Connect(b, srv.URL())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := bus.EnsureLayout(ctx, cjs, 1); err != nil {
			b.Fatal(err)
		}
		return cjs, pjs
	}},
	{"nkeys", func(b *testing.B) (jetstream.JetStream, jetstream.JetStream) {
		return asClusterd(b, testenv.NATS(b))
	}},
	{"tls+nkeys", func(b *testing.B) (jetstream.JetStream, jetstream.JetStream) {
		f, err := natsauth.GenerateTLS(filepath.Join(b.TempDir(), "tls"), "127.0.0.1")
		if err != nil {
			b.Fatal(err)
		}
		env := testenv.NATSWith(b, testenv.NATSOptions{TLS: f.Server(), ClientTLS: f.Client()})
		if !strings.HasPrefix(env.Server.URL(), "tls://") {
			b.Fatalf("NATS at %s, want tls://", env.Server.URL())
		}
		return asClusterd(b, env)
	}},
}

// asClusterd connects twice to env as clusterd.
func asClusterd(b *testing.B, env *testenv.NATSEnv) (jetstream.JetStream, jetstream.JetStream) {
	_, cjs := env.ConnectAs(b, "clusterd")
	_, pjs := env.ConnectAs(b, "clusterd")
	return cjs, pjs
}

// BenchmarkPublishToReconcile measures publish → Reconciler.Reconcile latency through
// hostplane's reconcile controller (durable consumer, keyed queue, 4 workers), one key per
// event, at 1, 100 and 1,000 events/s, with the NATS server plain, with nkey identities and
// with TLS and nkey identities (each rate runs the three in turn, each on a server of its
// own; the controller and the publisher are clusterd).
func BenchmarkPublishToReconcile(b *testing.B) {
	for _, r := range rates {
		for _, sec := range securities {
			b.Run(fmt.Sprintf("rate=%d/s/nats=%s", r.perSecond, sec.name), func(b *testing.B) {
				cjs, pjs := sec.start(b)
				l := newLatencies(r.events)
				c, err := reconcile.New(cjs, reconcile.Config{
					Name: "clusterd", FilterSubjects: []string{events.ResourceFilter(events.ResourceCluster)}, Resync: -1,
				}, reconcile.Func(func(_ context.Context, key string) (reconcile.Result, error) {
					l.receive(key)
					return reconcile.Result{}, nil
				}))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() { _ = c.Start(ctx) }()
				testenv.Eventually(b, 10*time.Second, c.Started, "controller did not start")
				p := bus.NewPublisher(pjs, "bench")
				b.ResetTimer()
				pace(b, r.events, r.perSecond, func(i int) error {
					key := fmt.Sprintf("c-%d", i)
					l.send(key)
					_, err := p.Publish(ctx, key, events.ResourceCluster, "updated", key, nil)
					return err
				})
				wait(b, l)
				b.StopTimer()
				l.report(b)
			})
		}
	}
}

// BenchmarkBareJetStream is the floor: the same rates through a bare JetStream publish and a
// durable pull consumer's Consume callback, no envelope, no queue.
func BenchmarkBareJetStream(b *testing.B) {
	for _, r := range rates {
		b.Run(fmt.Sprintf("rate=%d/s", r.perSecond), func(b *testing.B) {
			env := testenv.NATS(b)
			ctx := context.Background()
			l := newLatencies(r.events)
			cons, err := env.JS.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
				Durable: "bare", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "hostplane.evt.>",
			})
			if err != nil {
				b.Fatal(err)
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				l.receive(string(m.Data()))
				_ = m.Ack()
			})
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Stop()
			b.ResetTimer()
			pace(b, r.events, r.perSecond, func(i int) error {
				id := fmt.Sprintf("c-%d", i)
				l.send(id)
				_, err := env.JS.Publish(ctx, "hostplane.evt."+id+".cluster.updated", []byte(id))
				return err
			})
			wait(b, l)
			b.StopTimer()
			l.report(b)
		})
	}
}
