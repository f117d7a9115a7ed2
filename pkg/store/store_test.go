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

// beforeWrite sees the value about to be written (generation bumped), runs only when there
// is a write, and its error prevents the write.
func TestStore_MutateBefore_RunsJustBeforeEachWrite(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", &thing{ObjectMeta: api.ObjectMeta{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	record := func(_ context.Context, v *thing) error { seen = append(seen, v.Generation); return nil }
	if _, _, err := s.MutateBefore(ctx, "a", true, func(v *thing) error { v.Spec.Size = 3; return nil }, record); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MutateBefore(ctx, "a", true, func(v *thing) error { v.Spec.Size = 3; return nil }, record); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != 2 {
		t.Fatalf("beforeWrite saw generations %v, want [2]: once, for the one write, after the bump", seen)
	}
	refuse := errors.New("outbox unavailable")
	_, _, err := s.MutateBefore(ctx, "a", true, func(v *thing) error { v.Spec.Size = 4; return nil },
		func(context.Context, *thing) error { return refuse })
	if !errors.Is(err, refuse) {
		t.Fatalf("MutateBefore = %v, want the beforeWrite error", err)
	}
	if v, _, _ := s.Get(ctx, "a"); v.Spec.Size != 3 {
		t.Fatalf("size = %d, want 3: a refused beforeWrite must prevent the write", v.Spec.Size)
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

func TestStore_MutateGivesUpAfterTenConflictingWrites(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "a", &thing{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, _, err := s.Mutate(ctx, "a", true, func(v *thing) error {
		calls++
		// Another writer gets in between every read and write.
		cur, rev, err := s.Get(ctx, "a")
		if err != nil {
			return err
		}
		cur.Status.Phase += "x"
		if _, err := s.Update(ctx, "a", cur, rev); err != nil {
			return err
		}
		v.Spec.Size++
		return nil
	})
	if !errors.Is(err, store.ErrConflict) || err.Error() != "a: gave up after 10 conflicting writes: revision conflict" {
		t.Fatalf("err = %v, want the give-up conflict", err)
	}
	if calls != 10 {
		t.Errorf("fn called %d times, want 10", calls)
	}
}

// List gives every key's latest value and revision, without the deleted ones; an empty
// bucket, or a filter nothing matches, lists nothing.
func TestStore_ListGivesLatestValuesWithoutDeletedKeys(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if l, err := s.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("empty bucket: %v, %v; want nothing", l, err)
	}
	revs := map[string]uint64{}
	for _, k := range []string{"c1.a", "c1.b", "c2.a"} {
		rev, err := s.Create(ctx, k, &thing{ObjectMeta: api.ObjectMeta{Name: k}})
		if err != nil {
			t.Fatal(err)
		}
		revs[k] = rev
	}
	v, _, _ := s.Get(ctx, "c1.a")
	v.Spec.Size = 3
	rev, err := s.Update(ctx, "c1.a", v, revs["c1.a"])
	if err != nil {
		t.Fatal(err)
	}
	revs["c1.a"] = rev
	if err := s.Delete(ctx, "c1.b", revs["c1.b"]); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Entry[thing]{}
	for _, e := range l {
		got[e.Key] = e
	}
	if len(got) != 2 || got["c1.a"].Revision != revs["c1.a"] || got["c1.a"].Value.Spec.Size != 3 || got["c2.a"].Revision != revs["c2.a"] {
		t.Fatalf("List: %+v; want c1.a (size 3, revision %d) and c2.a (revision %d)", l, revs["c1.a"], revs["c2.a"])
	}
	if l, err := s.List(ctx, "c2.>"); err != nil || len(l) != 1 || l[0].Key != "c2.a" {
		t.Fatalf("List c2.>: %+v, %v; want c2.a", l, err)
	}
	if l, err := s.List(ctx, "c3.>"); err != nil || len(l) != 0 {
		t.Fatalf("List c3.>: %+v, %v; want nothing", l, err)
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

// A Mutate cut short by a cancelled context (a daemon shutting down) reports the
// cancellation; client-go's retry.OnError alone turned it into success with a nil value.
func TestStore_MutateWithACancelledContextFailsAndReturnsNoValue(t *testing.T) {
	s := newStore(t)
	if _, err := s.Create(t.Context(), "k", &thing{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	v, _, err := s.MutateBefore(ctx, "k", false, func(x *thing) error { x.Spec.Size = 2; return nil }, nil)
	if !errors.Is(err, context.Canceled) || v != nil {
		t.Fatalf("MutateBefore with a cancelled context = %v, %v; want nil and context.Canceled", v, err)
	}
}

func TestRetry_ReturnsAContextErrorOfTheFirstCallAndRetriesConflicts(t *testing.T) {
	calls := 0
	err := store.RetryOnConflict(func(err error) bool { return errors.Is(err, store.ErrConflict) }, func() error {
		calls++
		if calls < 3 {
			return store.ErrConflict
		}
		return context.DeadlineExceeded
	})
	if !errors.Is(err, context.DeadlineExceeded) || calls != 3 {
		t.Fatalf("after two conflicts and a deadline: %v in %d calls, want DeadlineExceeded in 3", err, calls)
	}
}
