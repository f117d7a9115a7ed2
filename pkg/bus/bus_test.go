package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestPublishEvent_SameIDIsStoredOnce(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	ev, err := events.New("/hostplane/test", events.ResourceCluster, "created", "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := events.Subject("demo", events.ResourceCluster, "created")
	dup, err := bus.PublishEvent(ctx, env.JS, subject, ev)
	if err != nil || dup {
		t.Fatalf("first publish: dup=%v err=%v", dup, err)
	}
	dup, err = bus.PublishEvent(ctx, env.JS, subject, ev) // a retried publish
	if err != nil || !dup {
		t.Fatalf("second publish: dup=%v err=%v, want a duplicate", dup, err)
	}
	s, err := env.JS.Stream(ctx, events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
}

func TestEnsureStreamsAndBucket_AreIdempotent(t *testing.T) {
	env := testenv.NATS(t)
	ctx := context.Background()
	for range 2 {
		if err := bus.EnsureStreams(ctx, env.JS); err != nil {
			t.Fatal(err)
		}
		if _, err := bus.EnsureBucket(ctx, env.JS, bus.BucketClusters); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEmbedded_StateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := bus.Connect(ctx, srv.URL(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, js := testenv.Connect(t, srv.URL())
	kv, err := bus.EnsureBucket(ctx, js, bus.BucketClusters)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "demo", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Stop()

	srv2, err := bus.RunEmbedded(bus.EmbeddedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Stop()
	_, js2 := testenv.Connect(t, srv2.URL())
	kv2, err := bus.EnsureBucket(ctx, js2, bus.BucketClusters)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv2.Get(ctx, "demo"); err != nil {
		t.Fatalf("key lost across restart: %v", err)
	}
}

func TestConnect_GivesUpWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := bus.Connect(ctx, "nats://127.0.0.1:1", "test", nil); err == nil {
		t.Fatal("connected to a port nobody listens on")
	}
}
