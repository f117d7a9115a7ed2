package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// smallBucket is an owner's bucket whose limit an operator lowered to maxBytes.
func smallBucket(t *testing.T, maxBytes int64) (jetstream.KeyValue, *store.Store[thing]) {
	t.Helper()
	env := testenv.NATS(t)
	ctx := context.Background()
	kv, err := bus.EnsureBucket(ctx, env.JS, "things")
	if err != nil {
		t.Fatal(err)
	}
	s, err := env.JS.Stream(ctx, "KV_things")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = maxBytes
	if _, err := env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return kv, store.New[thing](kv)
}

func named(n int) *thing {
	return &thing{ObjectMeta: api.ObjectMeta{Name: fmt.Sprintf("thing-%03d-%s", n, strings.Repeat("x", 400))}}
}

// A bucket filled by creates refuses more with ErrFull, naming the bucket, while reads,
// updates (a deletion timestamp, a status) and deletes go on; deleting makes room again.
func TestStore_AFullBucketRefusesCreatesButNotReadsUpdatesOrDeletes(t *testing.T) {
	_, s := smallBucket(t, 64<<10)
	ctx := context.Background()
	var keys []string
	var full error
	for n := range 1000 {
		key := fmt.Sprintf("k%03d", n)
		if _, err := s.Create(ctx, key, named(n)); err != nil {
			full = err
			break
		}
		keys = append(keys, key)
	}
	if !errors.Is(full, store.ErrFull) || !strings.Contains(full.Error(), "things") {
		t.Fatalf("creating until the bucket is full: %d created, then %v; want ErrFull naming the bucket", len(keys), full)
	}
	if len(keys) < 50 {
		t.Fatalf("only %d keys fit in 64 KiB", len(keys))
	}
	for _, key := range keys[:5] {
		v, rev, err := s.Get(ctx, key)
		if err != nil {
			t.Fatalf("get %s of a full bucket: %v", key, err)
		}
		v.Status.Phase = "Deleting"
		if _, err := s.Update(ctx, key, v, rev); err != nil {
			t.Fatalf("update %s of a full bucket: %v", key, err)
		}
	}
	for _, key := range keys {
		if err := s.Delete(ctx, key, 0); err != nil {
			t.Fatalf("delete %s of a full bucket: %v", key, err)
		}
	}
	if err := s.Bucket().PurgeDeletes(ctx); err != nil { // what frees the bytes of deleted keys
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "again", named(0)); err != nil {
		t.Fatalf("create once room was made: %v", err)
	}
}

// A bucket that JetStream itself refuses (filled past the store's limits by another
// writer) is ErrFull too, not an error that says NATS is unreachable.
func TestStore_JetStreamsOwnRefusalIsErrFull(t *testing.T) {
	kv, s := smallBucket(t, 16<<10)
	ctx := context.Background()
	for n := 0; ; n++ {
		if _, err := kv.Put(ctx, fmt.Sprintf("raw%03d", n), []byte(strings.Repeat("y", 500))); err != nil {
			break
		}
	}
	_, err := s.Create(ctx, "one-more", named(1))
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("create in a bucket JetStream refuses: %v, want ErrFull", err)
	}
}
