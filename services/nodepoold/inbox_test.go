package nodepoold

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// publishInbound sends an inbound CloudEvent on hostplane.in.<cluster>.<typ>.
// The Nats-Msg-Id is the event id plus a counter, so a replay passes JetStream's duplicate
// window and reaches the owner's own dedup.
func (e *env) publishInbound(cluster, typ, id, data string) {
	e.t.Helper()
	ev, _ := json.Marshal(map[string]any{
		"specversion": "1.0", "id": id, "source": "/autoscaler", "type": "io.hostplane.in." + typ,
		"time": "2026-01-02T15:04:05Z", "datacontenttype": "application/json", "data": json.RawMessage(data),
	})
	msg := &nats.Msg{Subject: events.InboxPrefix + "." + cluster + "." + typ, Data: ev, Header: nats.Header{}}
	e.mu.Lock()
	e.published++
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s-%d", id, e.published))
	e.mu.Unlock()
	if _, err := e.nats.JS.PublishMsg(context.Background(), msg); err != nil {
		e.t.Fatal(err)
	}
}

func TestInbox_NodePoolScaleSetsReplicasThroughThePatchPath(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	np := e.createPool("demo", poolBody("workers", replace3))
	e.createPool("demo", poolBody("auto", `"autoScaling":{"min":1,"max":3},"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`))

	e.publishInbound("demo", events.InboundNodePoolScale, "scale-1", `{"nodePool":"workers","replicas":7}`)
	testenv.Eventually(t, 20*time.Second, func() bool {
		got := e.getPool("demo", "workers")
		return got.Spec.Replicas != nil && *got.Spec.Replicas == 7 && got.Generation == 2
	}, "nodepool.scale never took effect")
	if got := e.getPool("demo", "workers"); got.Status.ConfigHash != np.Status.ConfigHash {
		t.Errorf("scaling changed the config hash")
	}

	tests := []struct{ id, cluster, data, reason string }{
		{"scale-1", "demo", `{"nodePool":"workers","replicas":1}`, "duplicate event id"},
		{"scale-2", "demo", `{"nodePool":"nope","replicas":1}`, `node pool "nope" of cluster "demo" not found`},
		{"scale-3", "demo", `{"nodePool":"auto","replicas":2}`, "spec.replicas"},
		{"scale-4", "demo", `{"nodePool":"workers","replicas":-1}`, "does not match its schema"},
		{"scale-5", "ghost", `{"nodePool":"workers","replicas":1}`, "not found"},
	}
	for _, tt := range tests {
		e.publishInbound(tt.cluster, events.InboundNodePoolScale, tt.id, tt.data)
	}
	for _, tt := range tests {
		var reason, source string
		testenv.Eventually(t, 20*time.Second, func() bool { reason, source = e.rejection(tt.id); return reason != "" }, "no rejection of %s", tt.id)
		if !strings.Contains(reason, tt.reason) || source != "/hostplane/nodepoold" {
			t.Errorf("%s: rejected by %s with %q, want %q", tt.id, source, reason, tt.reason)
		}
	}
	if got := e.getPool("demo", "workers"); *got.Spec.Replicas != 7 {
		t.Errorf("a rejected event changed replicas to %d", *got.Spec.Replicas)
	}
}
