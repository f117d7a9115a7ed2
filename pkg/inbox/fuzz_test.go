package inbox

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/events"
)

// fuzzMsg is an inbound message as the consumer's iterator hands it over, without a server.
type fuzzMsg struct {
	jetstream.Msg // the methods the consumer does not call
	subject       string
	data          []byte
	header        nats.Header
	acks, naks    int
}

func (m *fuzzMsg) Subject() string                           { return m.subject }
func (m *fuzzMsg) Data() []byte                              { return m.data }
func (m *fuzzMsg) Headers() nats.Header                      { return m.header }
func (m *fuzzMsg) Metadata() (*jetstream.MsgMetadata, error) { return nil, jetstream.ErrNotJSMessage }
func (m *fuzzMsg) Ack() error                                { m.acks++; return nil }
func (m *fuzzMsg) NakWithDelay(time.Duration) error          { m.naks++; return nil }

// fuzzKV is a dedup bucket in memory.
type fuzzKV struct {
	jetstream.KeyValue
	m map[string][]byte
}

type fuzzEntry struct {
	jetstream.KeyValueEntry
	value []byte
}

func (e fuzzEntry) Value() []byte { return e.value }

func (kv *fuzzKV) Get(_ context.Context, key string) (jetstream.KeyValueEntry, error) {
	v, ok := kv.m[key]
	if !ok {
		return nil, jetstream.ErrKeyNotFound
	}
	return fuzzEntry{value: v}, nil
}

func (kv *fuzzKV) Put(_ context.Context, key string, value []byte) (uint64, error) {
	kv.m[key] = value
	return uint64(len(kv.m)), nil
}

// inboundSeeds are messages as senders publish them (docs/inbound-events.md, the inbox tests)
// and as they get them wrong.
var inboundSeeds = []struct{ subject, data string }{
	{"hostplane.in.demo.nodepool.scale", `{"specversion":"1.0","id":"s-1","source":"/test","type":"io.hostplane.in.nodepool.scale",` +
		`"time":"2026-01-02T15:04:05Z","datacontenttype":"application/json","data":{"nodePool":"workers","replicas":3}}`},
	{"hostplane.in.demo.cluster.upgrade", `{"specversion":"1.0","id":"deploy-4711","source":"/ci","type":"io.hostplane.in.cluster.upgrade",` +
		`"time":"2026-01-02T15:04:05Z","data":{"version":"1.34.4"}}`},
	{"hostplane.in.demo.cluster.upgrade", `{"specversion":"1.0","id":"reject-me","source":"/ci","type":"io.hostplane.in.cluster.upgrade",` +
		`"time":"2026-01-02T15:04:05Z","data":{"version":"1.34.4"}}`},
	{"hostplane.in.demo.machine.terminating", `{"specversion":"1.0","id":"spot-9","source":"/cloud","type":"io.hostplane.in.machine.terminating",` +
		`"time":"2026-01-02T15:04:05Z","data":{"machine":"workers-7f9c2"}}`},
	{"hostplane.in.demo.cluster.upgrade", `{"specversion":"1.0","id":"x","source":"/ci","type":"io.hostplane.in.nodepool.scale",` +
		`"time":"2026-01-02T15:04:05Z","data":{"version":"1.34.4"}}`},
	{"hostplane.in.demo.nodepool.scale", `{"specversion":"1.0","id":"x","source":"/t","type":"io.hostplane.in.nodepool.scale",` +
		`"time":"2026-01-02T15:04:05Z","data":{"nodePool":"workers","replicas":-1}}`},
	{"hostplane.in.demo.cluster.explode", `{"specversion":"1.0","id":"x","source":"/t","type":"io.hostplane.in.cluster.explode","time":"2026-01-02T15:04:05Z"}`},
	{"hostplane.in.Demo.cluster.upgrade", `{}`},
	{"hostplane.in.demo", `{}`},
	{"hostplaoooooooemo.nodepool.scale", `{"specversion":"1.0","id":"s-2","source":"/test","type":"io.hostplane.in.nodepool.scale",` +
		`"time":"2026-01-02T15:04:05Z","data":{"nodePool":"workers","replicas":3}}`}, // not the inbox prefix (found by the fuzzer)
	{"hostplane.evt.demo.cluster.created", `{}`},
	{"hostplane.in.demo.nodepool.scale", `{`},
	{"hostplane.in.demo.nodepool.scale", ``},
}

// FuzzConsumerProcess runs one inbound message (subject, payload and a traceparent header, all
// the sender's) through the front desk's processing twice, as a redelivery would. It never
// panics; every delivery is acked or retried exactly once; every rejection has a reason; and a
// handler runs at most once, only for a subject of its type carrying a CloudEvent of that type
// whose data its schema accepts.
func FuzzConsumerProcess(f *testing.F) {
	for _, s := range inboundSeeds {
		f.Add(s.subject, []byte(s.data), "")
	}
	f.Add("hostplane.in.demo.nodepool.scale", []byte(inboundSeeds[0].data), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("hostplane.in.demo.nodepool.scale", []byte(inboundSeeds[0].data), "00-zz-yy-01")

	f.Fuzz(func(t *testing.T, subject string, data []byte, traceparent string) {
		var applied []string
		handler := func(typ string) Handler {
			return func(_ context.Context, cluster string, ev events.Event) error {
				c, tail, err := events.ParseInboxSubject(subject)
				it, _ := events.LookupInbound(typ)
				switch {
				case err != nil || c != cluster || tail != typ:
					t.Fatalf("%s handler ran for subject %q (cluster %q)", typ, subject, cluster)
				case ev.Type != it.CloudEventType():
					t.Fatalf("%s handler ran for CloudEvent type %q", typ, ev.Type)
				case events.ValidateInboundData(typ, ev.Data) != nil:
					t.Fatalf("%s handler ran for data %q its schema refuses", typ, ev.Data)
				}
				if ev.ID == "reject-me" {
					return Rejectf("the handler refuses %s", ev.ID) // not remembered: it may run again
				}
				applied = append(applied, typ)
				return nil
			}
		}
		var rejections []Rejection
		c, err := New(nil, Config{
			Name:      "fuzz-inbox",
			FrontDesk: true,
			Handlers: map[string]Handler{
				events.InboundClusterUpgrade: handler(events.InboundClusterUpgrade),
				events.InboundNodePoolScale:  handler(events.InboundNodePoolScale),
			},
			Dedup: &fuzzKV{m: map[string][]byte{}},
			Reject: func(_ context.Context, _ string, r Rejection) error {
				rejections = append(rejections, r)
				return nil
			},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		header := nats.Header{}
		if traceparent != "" {
			header.Set("traceparent", traceparent)
		}
		for range 2 {
			msg := &fuzzMsg{subject: subject, data: data, header: header}
			c.process(context.Background(), msg)
			if msg.acks+msg.naks != 1 {
				t.Fatalf("subject %q, payload %q: %d acks and %d naks, want exactly one", subject, data, msg.acks, msg.naks)
			}
		}
		if len(applied) > 1 {
			t.Fatalf("subject %q, payload %q: applied %d times: %v", subject, data, len(applied), applied)
		}
		for _, r := range rejections {
			if r.Reason == "" || r.Subject != subject {
				t.Fatalf("subject %q: rejection %+v", subject, r)
			}
		}
	})
}
