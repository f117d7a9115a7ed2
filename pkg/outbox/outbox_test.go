package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// testBackoff and testAckWait keep retries and redeliveries fast in tests.
var testBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10, Cap: 200 * time.Millisecond}

const (
	testAckWait = time.Second
	testSettle  = 50 * time.Millisecond
)

func testConfig(reg prometheus.Registerer) Config {
	return Config{Daemon: "testd", Registry: reg, AckWait: testAckWait, Settle: testSettle, Backoff: testBackoff}
}

func newOutbox(t *testing.T, js jetstream.JetStream, cfg Config) *Outbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := New(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// startRelay runs o's relay until the test ends (or the returned stop is called) and checks
// that it then stops, without error, promptly.
func startRelay(t *testing.T, o *Outbox) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay returned %v after its context ended, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("relay did not stop within 10s of its context ending")
		}
	}
	t.Cleanup(stop)
	return stop
}

// published lists the ids of the events in HOSTPLANE_EVENTS, in stream order.
func published(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func count(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// entries is how many entries daemon's outbox holds.
func entries(t *testing.T, js jetstream.JetStream, daemon string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, StreamName(daemon))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// waitRelayed waits until event id is in the events stream once and the outbox is empty.
func waitRelayed(t *testing.T, js jetstream.JetStream, id, when string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool { return count(published(t, js), id) == 1 },
		"event %s was not published once %s", id, when)
	testenv.Eventually(t, 5*time.Second, func() bool { return entries(t, js, "testd") == 0 },
		"the outbox still holds entries after event %s went out %s", id, when)
}

func record(t *testing.T, o *Outbox, key, verb string) events.Event {
	t.Helper()
	e, err := o.Record(context.Background(), key, events.ResourceCluster, verb, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e.Event
}

func TestRelay_PublishesEntriesInRecordOrder_AndRemovesEachAfterItsAck(t *testing.T) {
	env := testenv.NATS(t)
	reg := prometheus.NewRegistry()
	o := newOutbox(t, env.JS, testConfig(reg))
	var want []string
	for i, verb := range []string{"created", "updated", "status", "updated", "deleting", "deleted"} {
		for _, key := range []string{"alpha", "beta"} {
			want = append(want, record(t, o, key, verb).ID)
		}
		if i == 0 && entries(t, env.JS, "testd") != 2 {
			t.Fatalf("outbox holds %d entries before the relay runs, want 2", entries(t, env.JS, "testd"))
		}
	}

	startRelay(t, o)
	testenv.Eventually(t, 10*time.Second, func() bool { return len(published(t, env.JS)) >= len(want) },
		"the relay did not publish %d events", len(want))
	if got := published(t, env.JS); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("published ids\n %v\nwant, in record order,\n %v", got, want)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return entries(t, env.JS, "testd") == 0 },
		"published entries were not removed from the outbox")
	if n := testutil.ToFloat64(o.m.published); n != float64(len(want)) {
		t.Errorf("hostplane_outbox_published_total = %v, want %d", n, len(want))
	}
	if n := testutil.ToFloat64(o.m.pending); n != 0 {
		t.Errorf("hostplane_outbox_pending = %v once everything is out, want 0", n)
	}
}

// The relay leaves a fresh entry to its writer for Settle: it never announces a write before
// the writer had the time to store it.
func TestRelay_LeavesAFreshEntryToItsWriterForSettle(t *testing.T) {
	env := testenv.NATS(t)
	cfg := testConfig(prometheus.NewRegistry())
	cfg.Settle, cfg.AckWait = time.Second, 3*time.Second
	o := newOutbox(t, env.JS, cfg)
	startRelay(t, o)
	recorded := time.Now()
	ev := record(t, o, "demo", "created")
	waitRelayed(t, env.JS, ev.ID, "by the relay")
	if waited := time.Since(recorded); waited < cfg.Settle-100*time.Millisecond {
		t.Errorf("the relay published %v after the record, before Settle (%v)", waited, cfg.Settle)
	}
}

// The writer sends its entry once its write succeeded; the relay's later publish is a
// duplicate, so the event is stored once, and the entry goes.
func TestSend_PublishesAtOnce_AndTheRelayAddsNoCopy(t *testing.T) {
	env := testenv.NATS(t)
	cfg := testConfig(prometheus.NewRegistry())
	cfg.Settle, cfg.AckWait = 2*time.Second, 5*time.Second
	o := newOutbox(t, env.JS, cfg)
	startRelay(t, o)
	e, err := o.Record(context.Background(), "demo", events.ResourceCluster, "created", "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Send(context.Background(), e, Entry{})
	if n := count(published(t, env.JS), e.Event.ID); n != 1 {
		t.Fatalf("event published %d times right after Send, want 1", n)
	}
	if n := entries(t, env.JS, "testd"); n != 1 {
		t.Fatalf("outbox holds %d entries right after Send, want 1 (the relay's)", n)
	}
	waitRelayed(t, env.JS, e.Event.ID, "after the relay's duplicate publish")
}

func TestRelay_WhenTheEventsStreamIsGone_RetriesUntilItIsBack(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	if err := env.JS.DeleteStream(ctx, events.EventsStream); err != nil {
		t.Fatal(err)
	}
	o := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	ev := record(t, o, "demo", "created")
	startRelay(t, o)

	testenv.Eventually(t, 10*time.Second, func() bool { return testutil.ToFloat64(o.m.failures) >= 3 },
		"the relay did not retry the publish while the events stream is missing")
	if n := entries(t, env.JS, "testd"); n != 1 {
		t.Fatalf("outbox holds %d entries while the publish fails, want 1 (kept)", n)
	}
	if n := testutil.ToFloat64(o.m.pending); n != 1 {
		t.Errorf("hostplane_outbox_pending = %v while the publish fails, want 1", n)
	}

	if err := bus.EnsureStreams(ctx, env.JS); err != nil {
		t.Fatal(err)
	}
	waitRelayed(t, env.JS, ev.ID, "once the events stream came back")
}

// Two relays of one daemon (two replicas) share the consumer: each entry goes out once and
// the order holds.
func TestRelay_TwoReplicas_PublishEachEntryOnceInOrder(t *testing.T) {
	env := testenv.NATS(t)
	a := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	_, js2 := env.ConnectAs(t, natsauth.Admin)
	b := newOutbox(t, js2, testConfig(prometheus.NewRegistry()))
	startRelay(t, a)
	startRelay(t, b)
	var want []string
	for i := range 20 {
		o := a
		if i%2 == 1 {
			o = b
		}
		want = append(want, record(t, o, "demo", "updated").ID)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(published(t, env.JS)) >= len(want) },
		"the relays did not publish %d events", len(want))
	if got := published(t, env.JS); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("published ids\n %v\nwant each once, in record order,\n %v", got, want)
	}
}

// The relay's publish span is a child of the span that recorded the event, and the
// published message's headers carry the publish span, so a consumer continues the trace.
func TestRelay_PublishSpan_IsAChildOfTheRecordingSpan(t *testing.T) {
	env := testenv.NATS(t)
	exp := tracetest.NewInMemoryExporter()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "testd", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := testConfig(prometheus.NewRegistry())
	cfg.TracerProvider = tp
	o := newOutbox(t, env.JS, cfg)

	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /v1/clusters")
	if _, err := o.Record(ctx, "demo", events.ResourceCluster, "created", "demo", nil); err != nil {
		t.Fatal(err)
	}
	request.End()
	startRelay(t, o)

	var producer trace.SpanContext
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindProducer {
				producer = s.SpanContext
				if s.Name != "publish io.hostplane.cluster.created" || s.Parent.SpanID() != request.SpanContext().SpanID() {
					t.Errorf("producer span %q under %s, want \"publish io.hostplane.cluster.created\" under the request span %s",
						s.Name, s.Parent.SpanID(), request.SpanContext().SpanID())
				}
				return true
			}
		}
		return false
	}, "the relay made no producer span")
	s, err := env.JS.Stream(context.Background(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	testenv.Eventually(t, 5*time.Second, func() bool {
		raw, err = s.GetLastMsgForSubject(context.Background(), "hostplane.evt.demo.cluster.created")
		return err == nil
	}, "no published event: %v", err)
	got := trace.SpanContextFromContext(observe.ExtractNATS(context.Background(), raw.Header))
	if got.TraceID() != producer.TraceID() || got.SpanID() != producer.SpanID() {
		t.Errorf("headers carry %s/%s, want the producer span %s/%s", got.TraceID(), got.SpanID(), producer.TraceID(), producer.SpanID())
	}
}

// An entry that is not an event (another writer got permission it should not have) is
// dropped, and does not hold up the entries behind it.
func TestRelay_EntryThatIsNotAnEvent_IsDroppedAndTheNextGoesOut(t *testing.T) {
	env := testenv.NATS(t)
	o := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	if _, err := env.JS.Publish(context.Background(), Subject("testd"), []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	ev := record(t, o, "demo", "created")
	startRelay(t, o)
	waitRelayed(t, env.JS, ev.ID, "behind a bad entry")
}

func TestRecord_InvalidEvent_RecordsNothing(t *testing.T) {
	env := testenv.NATS(t)
	o := newOutbox(t, env.JS, testConfig(prometheus.NewRegistry()))
	for _, tc := range []struct{ name, cluster, verb string }{
		{"cluster with a dot", "a.b", "created"},
		{"wildcard verb", "demo", "*"},
		{"empty cluster", "", "created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := o.Record(context.Background(), tc.cluster, events.ResourceCluster, tc.verb, "k", nil); !errors.Is(err, events.ErrBadSubject) {
				t.Errorf("Record: %v, want ErrBadSubject", err)
			}
		})
	}
	if n := entries(t, env.JS, "testd"); n != 0 {
		t.Errorf("outbox holds %d entries, want 0", n)
	}
}

func TestNew_InvalidConfig_IsRejected(t *testing.T) {
	env := testenv.NATS(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no daemon", Config{}},
		{"daemon with a dot", Config{Daemon: "a.b"}},
		{"upper-case daemon", Config{Daemon: "Clusterd"}},
		{"ack wait under the backoff cap", Config{Daemon: "testd", AckWait: time.Second, Settle: time.Millisecond}},
		{"ack wait under settle", Config{Daemon: "testd", AckWait: 10 * time.Second, Settle: 20 * time.Second}},
		{"negative settle", Config{Daemon: "testd", Settle: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(context.Background(), env.JS, tc.cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
		})
	}
}

func TestStreamConfig_IsAWorkQueueWithTheReplicasAskedFor(t *testing.T) {
	for _, tc := range []struct{ replicas, want int }{{0, 1}, {1, 1}, {3, 3}} {
		cfg := StreamConfig("clusterd", tc.replicas)
		if cfg.Replicas != tc.want || cfg.Retention != jetstream.WorkQueuePolicy || cfg.Storage != jetstream.FileStorage ||
			cfg.Name != "HOSTPLANE_OUTBOX_CLUSTERD" || cfg.Subjects[0] != "hostplane.outbox.clusterd" || cfg.MaxAge != 0 {
			t.Errorf("StreamConfig(clusterd, %d) = %+v", tc.replicas, cfg)
		}
	}
}

// Asking for 3 replicas on a single server fails with the hint about HOSTPLANE_NATS_REPLICAS.
func TestNew_ThreeReplicasOnOneServer_FailsWithTheHint(t *testing.T) {
	env := testenv.NATS(t)
	cfg := testConfig(prometheus.NewRegistry())
	cfg.Replicas = 3
	_, err := New(context.Background(), env.JS, cfg)
	if err == nil || !strings.Contains(err.Error(), "HOSTPLANE_NATS_REPLICAS=3") || !strings.Contains(err.Error(), StreamName("testd")) {
		t.Errorf("New with 3 replicas on one server: %v, want an error naming the stream and the setting", err)
	}
}
