package leader_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/leader"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// elector connects as the daemon identity (with its generated NATS permissions) and returns
// an elector of the real lease bucket, and the connection's close.
func elector(t *testing.T, env *testenv.NATSEnv, daemon, identity string) (*leader.Elector, func()) {
	t.Helper()
	nc, js := env.ConnectAs(t, daemon)
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	e, err := leader.New(leader.Config{KV: kv, Name: daemon, Identity: identity, TTL: bus.LeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	return e, nc.Close
}

func TestElector_OneLeadsTheOtherTakesOverWhenItStopsAndARestartTakesItsLeaseBack(t *testing.T) {
	env := testenv.NATS(t)
	ctx := t.Context()
	a, _ := elector(t, env, "clusterd", "replica-a")
	b, _ := elector(t, env, "clusterd", "replica-b")
	if err := a.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	holdCtx, stopHolding := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() { held <- a.Hold(holdCtx) }()

	standby := make(chan string, 4)
	acquired := make(chan error, 1)
	go func() { acquired <- b.Acquire(ctx, func(h string) { standby <- h }) }()
	select {
	case h := <-standby:
		if h != "replica-a" {
			t.Fatalf("replica-b stands by for %q, want replica-a", h)
		}
	case err := <-acquired:
		t.Fatalf("replica-b took the lease replica-a holds (err %v)", err)
	case <-time.After(10 * time.Second):
		t.Fatal("replica-b never said whom it stands by for")
	}
	// a keeps it through several renewals: b still waits.
	select {
	case err := <-acquired:
		t.Fatalf("replica-b took the lease while replica-a renewed it (err %v)", err)
	case <-time.After(bus.LeaseTTL + time.Second):
	}

	stopHolding()
	if err := <-held; err != nil {
		t.Fatalf("Hold after its context ended: %v", err)
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("replica-b took over %s after replica-a gave the lease back", time.Since(released).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("replica-b did not take the lease replica-a gave back")
	}
	if h, _ := a.Holder(ctx); h != "replica-b" {
		t.Fatalf("holder %q, want replica-b", h)
	}

	// replica-b's process dies without giving the lease back; started again under the same
	// identity, it takes it back at once instead of waiting out the TTL.
	b2, _ := elector(t, env, "clusterd", "replica-b")
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := b2.Acquire(actx, nil); err != nil {
		t.Fatalf("a restart of replica-b did not take its own lease back at once: %v", err)
	}
}

func TestElector_ADeadHoldersLeaseExpiresAndItsOwnHoldGivesUpFirst(t *testing.T) {
	env := testenv.NATS(t)
	ctx := t.Context()
	// A bucket of its own with a short TTL, so the test waits 2 s and not bus.LeaseTTL.
	const ttl = 2 * time.Second
	kv, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "leases-short", TTL: ttl, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	nc, js := env.ConnectAs(t, "admin")
	kvA, err := js.KeyValue(ctx, "leases-short")
	if err != nil {
		t.Fatal(err)
	}
	var leaders atomic.Int32
	a, err := leader.New(leader.Config{KV: kvA, Name: "d", Identity: "a", TTL: ttl,
		OnChange: func(l bool) { leaders.Add(map[bool]int32{true: 1, false: -1}[l]) }})
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.New(leader.Config{KV: kv, Name: "d", Identity: "b", TTL: ttl,
		OnChange: func(l bool) {
			if l && leaders.Load() != 0 {
				t.Errorf("b leads while a still thinks it leads")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- a.Hold(ctx) }()
	time.Sleep(ttl) // a renews a few times
	nc.Close()      // a's NATS connection is gone: it can renew no more, like a partitioned replica
	cut := time.Now()
	acquired := make(chan error, 1)
	go func() { acquired <- b.Acquire(ctx, nil) }()

	select {
	case err := <-held:
		if !errors.Is(err, leader.ErrLost) {
			t.Fatalf("a's Hold returned %v, want ErrLost", err)
		}
		t.Logf("a stopped leading %s after its connection was cut", time.Since(cut).Round(time.Millisecond))
	case err := <-acquired:
		t.Fatalf("b took the lease before a gave up leading (err %v)", err)
	case <-time.After(2 * ttl):
		t.Fatal("a went on leading without renewing its lease")
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("b took over %s after a's connection was cut (TTL %s)", time.Since(cut).Round(time.Millisecond), ttl)
	case <-time.After(3 * ttl):
		t.Fatal("b never took the expired lease")
	}
}
