package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

type thing struct {
	api.ObjectMeta
	Spec   struct{ Size int } `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Phase              string
	} `json:"status"`
}

func newStore(t *testing.T) *store.Store[thing] {
	env := testenv.NATS(t)
	kv, err := bus.EnsureBucket(context.Background(), env.JS, "things")
	if err != nil {
		t.Fatal(err)
	}
	return store.New[thing](kv)
}

func TestStore_UpdateAtStaleRevisionIsAConflict(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	rev, err := s.Create(ctx, "a", &thing{ObjectMeta: api.ObjectMeta{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := s.Get(ctx, "a")
	v.Spec.Size = 1
	if _, err := s.Update(ctx, "a", v, rev); err != nil {
		t.Fatalf("first update: %v", err)
	}
	v.Spec.Size = 2
	if _, err := s.Update(ctx, "a", v, rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at stale revision: err = %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, "a", rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete at stale revision: err = %v, want ErrConflict", err)
	}
}

func TestStore_CreateTwiceAndGetMissing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", &thing{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "a", &thing{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if _, _, err := s.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, "a", &thing{}); err != nil {
		t.Fatalf("re-create after delete: %v", err)
	}
}

func TestStore_MutateBumpsGenerationOnlyForSpecChanges(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", &thing{ObjectMeta: api.ObjectMeta{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	v, _, err := s.Mutate(ctx, "a", true, func(v *thing) error { v.Spec.Size = 3; return nil })
	if err != nil || v.Generation != 2 {
		t.Fatalf("after spec change generation = %d, err %v; want 2", v.Generation, err)
	}
	v, _, err = s.Mutate(ctx, "a", true, func(v *thing) error { v.Spec.Size = 3; return nil })
	if err != nil || v.Generation != 2 {
		t.Fatalf("no-op spec write bumped generation to %d (err %v)", v.Generation, err)
	}
	v, _, err = s.Mutate(ctx, "a", false, func(v *thing) error {
		v.Status.ObservedGeneration = v.Generation
		v.Status.Phase = "Ready"
		return nil
	})
	if err != nil || v.Generation != 2 || v.Status.ObservedGeneration != 2 {
		t.Fatalf("status write: gen %d observed %d err %v", v.Generation, v.Status.ObservedGeneration, err)
	}
}

func TestStore_MutateRetriesConcurrentWriters(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", &thing{}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers)
	for range writers {
		go func() {
			_, _, err := s.Mutate(ctx, "a", true, func(v *thing) error { v.Spec.Size++; return nil })
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	v, _, _ := s.Get(ctx, "a")
	if v.Spec.Size != writers {
		t.Fatalf("size = %d after %d concurrent increments: a write was lost", v.Spec.Size, writers)
	}
}

func TestStore_WatchSeesPutsAndDeletes(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := s.Watch(ctx, ">", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "a", &thing{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	c1, c2 := <-ch, <-ch
	if c1.Key != "a" || c1.Deleted || c1.Value == nil || c2.Key != "a" || !c2.Deleted {
		t.Fatalf("changes = %+v, %+v", c1, c2)
	}
	keys, err := s.Keys(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys after delete = %v, %v", keys, err)
	}
}
