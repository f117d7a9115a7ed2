package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

type recorder struct {
	mu   sync.Mutex
	rejs []Rejection
}

func (r *recorder) reject(_ context.Context, _ string, rej Rejection) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejs = append(r.rejs, rej)
	return nil
}

func (r *recorder) list() []Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rejection(nil), r.rejs...)
}

func publish(t *testing.T, js jetstream.JetStream, subject, msgID string, ev map[string]any) {
	t.Helper()
	b, _ := json.Marshal(ev)
	msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, msgID)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func scale(id string, replicas int) map[string]any {
	return map[string]any{"specversion": "1.0", "id": id, "source": "/test", "type": "io.hostplane.in.nodepool.scale",
		"time": "2026-01-02T15:04:05Z", "datacontenttype": "application/json",
		"data": map[string]any{"nodePool": "workers", "replicas": replicas}}
}

func run(t *testing.T, js jetstream.JetStream, cfg Config) {
	t.Helper()
	c, err := New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func TestConsumer_RetriesAFailedHandlerAndAppliesEachIDOnce(t *testing.T) {
	n := testenv.NATS(t)
	dedup, err := EnsureDedupBucket(context.Background(), n.JS, "testd", 0)
	if err != nil {
		t.Fatal(err)
	}
	var calls, applied atomic.Int32
	rec := &recorder{}
	run(t, n.JS, Config{
		Name: "testd-inbox", Dedup: dedup, Reject: rec.reject, RetryDelay: 10 * time.Millisecond,
		Handlers: map[string]Handler{events.InboundNodePoolScale: func(_ context.Context, cluster string, ev events.Event) error {
			if calls.Add(1) == 1 {
				return errors.New("store unavailable")
			}
			var d struct{ Replicas int }
			if err := ev.DecodeData(&d); err != nil {
				return err
			}
			if d.Replicas > 10 {
				return Rejectf("at most 10 replicas")
			}
			applied.Add(1)
			return nil
		}},
	})
	publish(t, n.JS, "hostplane.in.demo.nodepool.scale", "a", scale("s-1", 3))
	testenv.Eventually(t, 30*time.Second, func() bool { return applied.Load() == 1 }, "applied after a retry")
	publish(t, n.JS, "hostplane.in.demo.nodepool.scale", "b", scale("s-1", 3))
	publish(t, n.JS, "hostplane.in.demo.nodepool.scale", "c", scale("s-2", 11))
	publish(t, n.JS, "hostplane.in.other.nodepool.scale", "d", scale("s-1", 3)) // ids are per cluster
	testenv.Eventually(t, 30*time.Second, func() bool { return len(rec.list()) == 2 && applied.Load() == 2 }, "two rejections, two applied")
	got := rec.list()
	if got[0].ID != "s-1" || got[0].Reason != ReasonDuplicate || got[0].EventID() != "s-1-rejected" {
		t.Errorf("first rejection %+v", got[0])
	}
	if got[1].ID != "s-2" || got[1].Reason != "at most 10 replicas" {
		t.Errorf("second rejection %+v", got[1])
	}
	if _, err := dedup.Get(context.Background(), DedupKey("demo", "s-1")); err != nil {
		t.Errorf("applied id not remembered: %v", err)
	}
}

func TestDedupKey_HashesIDsThatAreNotSafeKeyTokens(t *testing.T) {
	if k := DedupKey("demo", "abc-123"); k != "inbox.demo.abc-123" {
		t.Errorf("key %q", k)
	}
	k1, k2 := DedupKey("demo", "a.b c/*"), DedupKey("demo", "a.b c/+")
	if k1 == k2 || len(k1) > 80 {
		t.Errorf("keys %q %q", k1, k2)
	}
}

// A cluster flooding its subjects gets its rate applied and the rest rejected; another
// cluster's events go on.
func TestConsumer_AppliesAtMostItsRatePerCluster(t *testing.T) {
	n := testenv.NATS(t)
	dedup, err := EnsureDedupBucket(context.Background(), n.JS, "testd", 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	applied := map[string]int{}
	rec := &recorder{}
	run(t, n.JS, Config{
		Name: "testd-inbox", Dedup: dedup, Reject: rec.reject, Rate: 0.001, Burst: 5, // five, then one in 1000 s
		Handlers: map[string]Handler{events.InboundNodePoolScale: func(_ context.Context, cluster string, _ events.Event) error {
			mu.Lock()
			defer mu.Unlock()
			applied[cluster]++
			return nil
		}},
	})
	for i := range 20 {
		id := "flood-" + strconv.Itoa(i)
		publish(t, n.JS, "hostplane.in.noisy.nodepool.scale", id, scale(id, 3))
	}
	publish(t, n.JS, "hostplane.in.quiet.nodepool.scale", "q", scale("q-1", 3))
	count := func(cluster string) int {
		mu.Lock()
		defer mu.Unlock()
		return applied[cluster]
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(rec.list()) == 15 && count("quiet") == 1 }, "15 rejections and the quiet cluster's event applied")
	if got := count("noisy"); got != 5 {
		t.Errorf("the noisy cluster had %d events applied, want its burst, 5", got)
	}
	for _, r := range rec.list() {
		if !strings.HasPrefix(r.Reason, ReasonRateLimited) || !strings.Contains(r.Reason, "cluster noisy") {
			t.Errorf("rejection %+v, want %q naming the cluster", r, ReasonRateLimited)
		}
	}
}
