package infrad_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad/provider"
)

type rejection struct {
	ID, Type, Subject, Reason string
}

// inboxClient publishes inbound events and collects infrad's rejections.
type inboxClient struct {
	e        *env
	rejected chan *nats.Msg
}

func newInboxClient(e *env) *inboxClient {
	c := &inboxClient{e: e, rejected: make(chan *nats.Msg, 64)}
	sub, err := e.nats.Conn.ChanSubscribe("hostplane.evt.*.inbox.rejected", c.rejected)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nats.Conn.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// terminating publishes a machine.terminating CloudEvent with id for machine of cluster; msgID
// is its Nats-Msg-Id (a new one defeats JetStream's duplicate window, as a late replay would).
func (c *inboxClient) terminating(cluster, id, msgID, machine string) {
	c.e.t.Helper()
	ev := map[string]any{
		"specversion": "1.0", "id": id, "source": "/cloud/interruptions",
		"type": events.InboundTypePrefix + events.InboundMachineTerminating, "time": "2026-01-02T15:04:05Z",
		"datacontenttype": "application/json",
		"data":            map[string]string{"machine": machine, "notBefore": "2026-01-02T15:06:05Z"},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		c.e.t.Fatal(err)
	}
	msg := &nats.Msg{Subject: events.InboxPrefix + "." + cluster + "." + events.InboundMachineTerminating, Data: b, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, msgID)
	if _, err := c.e.nats.JS.PublishMsg(context.Background(), msg); err != nil {
		c.e.t.Fatal(err)
	}
}

// rejection waits for infrad's rejection of the inbound event id on cluster.
func (c *inboxClient) rejection(cluster, id string) rejection {
	c.e.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case m := <-c.rejected:
			ev, err := events.Decode(m.Data)
			if err != nil {
				c.e.t.Fatal(err)
			}
			var r rejection
			if err := ev.DecodeData(&r); err != nil {
				c.e.t.Fatal(err)
			}
			if r.ID != id {
				continue
			}
			if m.Subject != "hostplane.evt."+cluster+".inbox.rejected" || ev.Source != "/hostplane/infrad" || ev.ID != id+"-rejected" {
				c.e.t.Fatalf("rejection of %s: subject %s, event %+v", id, m.Subject, ev)
			}
			return r
		case <-deadline:
			c.e.t.Fatalf("no rejection of %q", id)
		}
	}
}

func (me *machinesEnv) getMachine(cluster, name string) *clusterv1.Machine {
	me.t.Helper()
	m := &clusterv1.Machine{}
	if err := me.kube.Get(me.t.Context(), types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: name}, m); err != nil {
		me.t.Fatal(err)
	}
	return m
}

func TestInbox_MachineTerminating_AnnotatesAndDeletesTheMachineOnceAndRejectsUnknownMachines(t *testing.T) {
	me := newMachinesEnv(t)
	me.startDemo()
	c := newInboxClient(me.env)
	m := me.createMachine("demo", "workers", "workers-7f9c2", []byte(`{"ignition":{"version":"3.4.0"}}`))
	// The LocalMachine's finalizer (infrad's) keeps its Machine's deletion observable; the
	// test stands in for Cluster API's own machine finalizer, which would hold it while draining.
	m.Finalizers = []string{"machine.cluster.x-k8s.io"}
	if err := me.kube.Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}

	c.terminating("demo", "spot-notice-88a1", "n1", "workers-7f9c2")
	var got *clusterv1.Machine
	testenv.Eventually(t, wait, func() bool {
		got = me.getMachine("demo", "workers-7f9c2")
		return got.DeletionTimestamp != nil
	}, "the Machine is being deleted after machine.terminating")
	if a := got.Annotations[provider.AnnotationTerminatingNotice]; a != "spot-notice-88a1" {
		t.Fatalf("annotation %s = %q, want the event id", provider.AnnotationTerminatingNotice, a)
	}

	// The same id again, past JetStream's duplicate window (another Nats-Msg-Id): no second effect.
	rv := got.ResourceVersion
	c.terminating("demo", "spot-notice-88a1", "n2", "workers-7f9c2")
	if r := c.rejection("demo", "spot-notice-88a1"); r.Reason != "duplicate event id" || r.Type != events.InboundMachineTerminating {
		t.Fatalf("replay: %+v", r)
	}
	if again := me.getMachine("demo", "workers-7f9c2"); again.ResourceVersion != rv {
		t.Fatalf("the replay changed the Machine: resourceVersion %s, was %s", again.ResourceVersion, rv)
	}

	// An unknown machine, and an unknown cluster, are rejected with the reason.
	c.terminating("demo", "spot-notice-ghost", "n3", "workers-ghost")
	if r := c.rejection("demo", "spot-notice-ghost"); !strings.Contains(r.Reason, `no machine "workers-ghost"`) {
		t.Fatalf("unknown machine: %+v", r)
	}
	c.terminating("nowhere", "spot-notice-nowhere", "n4", "workers-7f9c2")
	if r := c.rejection("nowhere", "spot-notice-nowhere"); r.Reason != "cluster nowhere does not exist" {
		t.Fatalf("unknown cluster: %+v", r)
	}

	// Once the finalizer is lifted (Cluster API drained it) the Machine goes.
	got = me.getMachine("demo", "workers-7f9c2")
	got.Finalizers = nil
	if err := me.kube.Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	me.waitGone(got, "the terminated Machine")
}
