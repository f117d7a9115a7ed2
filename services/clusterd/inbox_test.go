package clusterd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

type rejection struct {
	ID, Type, Subject, Reason string
}

// inboxClient publishes inbound events and collects what clusterd answers.
type inboxClient struct {
	e        *env
	rejected chan *nats.Msg
	updated  chan *nats.Msg
}

func newInboxClient(e *env) *inboxClient {
	c := &inboxClient{e: e, rejected: make(chan *nats.Msg, 64), updated: make(chan *nats.Msg, 64)}
	for subj, ch := range map[string]chan *nats.Msg{
		"hostplane.evt.*.inbox.rejected":  c.rejected,
		"hostplane.evt.*.cluster.updated": c.updated,
	} {
		sub, err := e.nats.Conn.ChanSubscribe(subj, ch)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := e.nats.Conn.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// publish sends payload on hostplane.in.<cluster>.<typ> with the given Nats-Msg-Id.
func (c *inboxClient) publish(cluster, typ, msgID string, payload []byte) {
	c.e.t.Helper()
	msg := &nats.Msg{Subject: events.InboxPrefix + "." + cluster + "." + typ, Data: payload, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, msgID)
	if _, err := c.e.nats.JS.PublishMsg(context.Background(), msg); err != nil {
		c.e.t.Fatal(err)
	}
}

// event is a structured CloudEvent for an inbound type with raw data.
func event(id, typ, data string) []byte {
	ev := map[string]any{
		"specversion": "1.0", "id": id, "source": "/ci/pipeline", "type": "io.hostplane.in." + typ,
		"time": "2026-01-02T15:04:05Z",
	}
	if data != "" {
		ev["datacontenttype"] = "application/json"
		ev["data"] = json.RawMessage(data)
	}
	b, _ := json.Marshal(ev)
	return b
}

// rejection waits for the rejection of the inbound event with id (or, for id "", on subject).
func (c *inboxClient) rejection(cluster, id, subject string) rejection {
	c.e.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-c.rejected:
			if m.Subject != "hostplane.evt."+cluster+".inbox.rejected" {
				c.e.t.Fatalf("rejection on %s", m.Subject)
			}
			ev, err := events.Decode(m.Data)
			if err != nil {
				c.e.t.Fatal(err)
			}
			if ev.Type != "io.hostplane.inbox.rejected" || ev.Source != "/hostplane/clusterd" {
				c.e.t.Fatalf("rejection event %+v", ev)
			}
			var r rejection
			if err := ev.DecodeData(&r); err != nil {
				c.e.t.Fatal(err)
			}
			if (id != "" && r.ID == id) || (id == "" && r.Subject == subject) {
				if id != "" && ev.ID != id+"-rejected" {
					c.e.t.Errorf("rejection event id %q, want %q", ev.ID, id+"-rejected")
				}
				return r
			}
		case <-deadline:
			c.e.t.Fatalf("no rejection of %q / %s", id, subject)
		}
	}
}

func (c *inboxClient) noUpdate() {
	c.e.t.Helper()
	select {
	case m := <-c.updated:
		c.e.t.Fatalf("unexpected %s", m.Subject)
	default:
	}
}

func TestInbox_ClusterUpgradeTakesEffectOnceThroughThePatchPath(t *testing.T) {
	e := start(t)
	c := newInboxClient(e)
	before := e.create("demo", "1.33.13")

	c.publish("demo", "cluster.upgrade", "m1", event("up-1", "cluster.upgrade", `{"version":"1.34.4"}`))
	select {
	case m := <-c.updated:
		if m.Subject != "hostplane.evt.demo.cluster.updated" {
			t.Fatalf("updated on %s", m.Subject)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no cluster.updated after cluster.upgrade")
	}
	after := e.get("demo")
	if after.Spec.Release.Version != "1.34.4" || after.Generation != before.Generation+1 {
		t.Fatalf("after upgrade: version %s generation %d (was %d)", after.Spec.Release.Version, after.Generation, before.Generation)
	}

	// The same event id again, after JetStream's dedup would no longer catch it (another Nats-Msg-Id).
	c.publish("demo", "cluster.upgrade", "m2", event("up-1", "cluster.upgrade", `{"version":"1.34.4"}`))
	if r := c.rejection("demo", "up-1", ""); r.Reason != "duplicate event id" || r.Type != "cluster.upgrade" || r.Subject != "hostplane.in.demo.cluster.upgrade" {
		t.Fatalf("replay: %+v", r)
	}
	c.noUpdate()
	if again := e.get("demo"); again.Generation != after.Generation || again.Spec.Release.Version != "1.34.4" {
		t.Fatalf("replay changed the cluster: generation %d version %s", again.Generation, again.Spec.Release.Version)
	}

	// The counter saw one applied and one rejected cluster.upgrade (counted once the
	// rejection is published, so it may trail the event a moment).
	got := map[string]float64{}
	testenv.Eventually(t, 10*time.Second, func() bool {
		mfs, err := e.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		clear(got)
		for _, mf := range mfs {
			if mf.GetName() != "hostplane_inbox_events_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var typ, outcome string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "type":
						typ = l.GetValue()
					case "outcome":
						outcome = l.GetValue()
					}
				}
				got[typ+"/"+outcome] = m.GetCounter().GetValue()
			}
		}
		return got["cluster.upgrade/applied"] == 1 && got["cluster.upgrade/rejected"] == 1
	}, "hostplane_inbox_events_total = %v", got)
}

func TestInbox_BadInboundEventsAreRejectedWithTheReasonAndChangeNothing(t *testing.T) {
	e := start(t)
	c := newInboxClient(e)
	before := e.create("demo", "1.33.13")

	for _, tc := range []struct {
		name, cluster, typ, id, data, want string
	}{
		{"version missing", "demo", "cluster.upgrade", "bad-1", `{}`, "missing property 'version'"},
		{"version not a string", "demo", "cluster.upgrade", "bad-2", `{"version":134}`, "/version"},
		{"unknown type", "demo", "cluster.explode", "bad-3", `{"version":"1.34.4"}`, "unknown event type cluster.explode"},
		{"type no schema can have", "demo", "Cluster.Explode", "bad-3b", `{"version":"1.34.4"}`, "unknown event type Cluster.Explode"},
		{"unknown cluster", "ghost", "cluster.upgrade", "bad-4", `{"version":"1.34.4"}`, "cluster ghost does not exist"},
		{"downgrade", "demo", "cluster.upgrade", "bad-5", `{"version":"1.32.0"}`, "spec.release.version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.publish(tc.cluster, tc.typ, tc.id, event(tc.id, tc.typ, tc.data))
			r := c.rejection(tc.cluster, tc.id, "")
			if !strings.Contains(r.Reason, tc.want) || r.Type != tc.typ {
				t.Fatalf("rejection %+v, want a reason containing %q", r, tc.want)
			}
		})
	}
	c.noUpdate()
	if now := e.get("demo"); now.Generation != before.Generation || now.Spec.Release.Version != "1.33.13" {
		t.Fatalf("a rejected event changed the cluster: generation %d version %s", now.Generation, now.Spec.Release.Version)
	}
	if e.get("ghost") != nil {
		t.Fatal("an event created cluster ghost")
	}

	// A payload that is not JSON is rejected and does not block the event behind it.
	c.publish("demo", "cluster.upgrade", "junk", []byte("this is not json"))
	if r := c.rejection("demo", "", "hostplane.in.demo.cluster.upgrade"); !strings.Contains(r.Reason, "malformed CloudEvent") {
		t.Fatalf("malformed payload: %+v", r)
	}
	c.publish("demo", "cluster.upgrade", "good", event("good-1", "cluster.upgrade", `{"version":"1.34.4"}`))
	select {
	case <-c.updated:
	case <-time.After(30 * time.Second):
		t.Fatal("the good event after the malformed one was not applied")
	}
	if now := e.get("demo"); now.Spec.Release.Version != "1.34.4" {
		t.Fatalf("version %s after the good event", now.Spec.Release.Version)
	}
}
