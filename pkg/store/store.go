package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/api"
)

// Store holds values of type T as JSON in a KV bucket.
type Store[T any] struct {
	kv   jetstream.KeyValue
	room *room
}

// New returns a typed store over kv.
func New[T any](kv jetstream.KeyValue) *Store[T] { return &Store[T]{kv: kv, room: &room{kv: kv}} }

// Bucket returns the underlying KV bucket.
func (s *Store[T]) Bucket() jetstream.KeyValue { return s.kv }

// Get returns the value and revision of key, or ErrNotFound.
func (s *Store[T]) Get(ctx context.Context, key string) (*T, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil, 0, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	v, err := decode[T](key, e.Value())
	if err != nil {
		return nil, 0, err
	}
	return v, e.Revision(), nil
}

// Create stores v under key if the key does not exist (or was deleted). An Object gets
// generation 1 and a creation timestamp.
func (s *Store[T]) Create(ctx context.Context, key string, v *T) (uint64, error) {
	if m, ok := any(v).(api.Object); ok {
		meta := m.Meta()
		meta.Generation = 1
		if meta.CreationTimestamp.IsZero() {
			meta.CreationTimestamp = time.Now().UTC().Truncate(time.Second)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("marshal %s: %w", key, err)
	}
	if err := s.room.check(ctx, CreateLimit, len(b)); err != nil {
		return 0, fmt.Errorf("create %s: %w", key, err)
	}
	rev, err := s.kv.Create(ctx, key, b)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("%s: %w", key, ErrExists)
		}
		return 0, fmt.Errorf("create %s: %w", key, full(err))
	}
	return rev, nil
}

// Update stores v under key if the key is still at revision rev, else ErrConflict.
func (s *Store[T]) Update(ctx context.Context, key string, v *T, rev uint64) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("marshal %s: %w", key, err)
	}
	if m, ok := any(v).(api.Object); !ok || m.Meta().DeletionTimestamp == nil { // deleting: the room above UpdateLimit is its
		if err := s.room.check(ctx, UpdateLimit, len(b)); err != nil {
			return 0, fmt.Errorf("update %s: %w", key, err)
		}
	}
	nrev, err := s.kv.Update(ctx, key, b, rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("%s at revision %d: %w", key, rev, ErrConflict)
		}
		return 0, fmt.Errorf("update %s: %w", key, full(err))
	}
	return nrev, nil
}

// Delete removes key if it is still at revision rev (0: whatever its revision), with its
// history: the bytes its revisions held are free again (a purge; watchers see a delete).
func (s *Store[T]) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := s.kv.Purge(ctx, key, opts...); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("%s at revision %d: %w", key, rev, ErrConflict)
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, full(err))
	}
	return nil
}

// Mutate reads key, applies fn and writes the result with compare-and-swap, retrying on
// conflict (up to 10 times). fn may be called more than once and must not have side effects.
// When spec is true and the object is an api.Object, its generation is bumped if the stored
// JSON changed. fn returning ErrNoChange skips the write.
func (s *Store[T]) Mutate(ctx context.Context, key string, spec bool, fn func(*T) error) (*T, uint64, error) {
	return s.MutateBefore(ctx, key, spec, fn, nil)
}

// MutateBefore is Mutate with beforeWrite called on each attempt that writes, after fn changed
// the value (and the generation was bumped), just before the write: where a daemon records
// the write's event in its outbox (pkg/outbox), so the event is stored before the change. An
// error from beforeWrite ends the mutation without a write.
func (s *Store[T]) MutateBefore(ctx context.Context, key string, spec bool, fn func(*T) error, beforeWrite func(context.Context, *T) error) (*T, uint64, error) {
	var (
		out  *T
		nrev uint64
	)
	isConflict := func(err error) bool { return errors.Is(err, ErrConflict) }
	err := Retry(mutateRetry, isConflict, func() error {
		v, rev, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		before, _ := json.Marshal(v)
		if err := fn(v); err != nil {
			if errors.Is(err, ErrNoChange) {
				out, nrev = v, rev
				return nil
			}
			return err
		}
		after, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("marshal %s: %w", key, err)
		}
		if string(before) == string(after) {
			out, nrev = v, rev
			return nil
		}
		if m, ok := any(v).(api.Object); ok && spec {
			m.Meta().Generation++
		}
		if beforeWrite != nil {
			if err := beforeWrite(ctx, v); err != nil {
				return fmt.Errorf("before writing %s: %w", key, err)
			}
		}
		if nrev, err = s.Update(ctx, key, v, rev); err != nil {
			return err
		}
		out = v
		return nil
	})
	switch {
	case isConflict(err):
		return nil, 0, fmt.Errorf("%s: gave up after %d conflicting writes: %w", key, mutateRetry.Steps, ErrConflict)
	case err != nil:
		return nil, 0, err
	}
	return out, nrev, nil
}

// mutateRetry is how often Mutate tries: ten times, at once (the next read is the wait).
var mutateRetry = wait.Backoff{Steps: 10}

// ErrNoChange may be returned by a Mutate function to skip the write.
var ErrNoChange = errors.New("no change")

// Entry is one stored value with its key and revision.
type Entry[T any] struct {
	Key      string
	Revision uint64
	Value    *T
}

// Keys returns every key of the bucket (optionally only those matching NATS subject-style
// filters such as "demo.>").
func (s *Store[T]) Keys(ctx context.Context, filters ...string) ([]string, error) {
	var (
		l   jetstream.KeyLister
		err error
	)
	if len(filters) > 0 {
		l, err = s.kv.ListKeysFiltered(ctx, filters...)
	} else {
		l, err = s.kv.ListKeys(ctx)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	_ = l.Stop() // the lister has stopped itself once Keys is drained
	return keys, nil
}

// List returns every value (optionally filtered as in Keys), deleted keys left out. It reads
// them in one pass, as the bucket's watcher delivers the latest value of every key and then
// says it is done, rather than a Get per key: with hundreds of clusters, a list of N round
// trips took seconds on a busy machine.
func (s *Store[T]) List(ctx context.Context, filters ...string) ([]Entry[T], error) {
	var (
		w   jetstream.KeyWatcher
		err error
	)
	if len(filters) > 0 {
		w, err = s.kv.WatchFiltered(ctx, filters, jetstream.IgnoreDeletes())
	} else {
		w, err = s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	}
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []Entry[T]
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("list: the watcher stopped")
			}
			if e == nil { // every key's latest value delivered
				return out, nil
			}
			v, err := decode[T](e.Key(), e.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, Entry[T]{Key: e.Key(), Revision: e.Revision(), Value: v})
		}
	}
}

// Change is one update seen by Watch. Value is nil for a delete.
type Change[T any] struct {
	Key      string
	Revision uint64
	Value    *T
	Deleted  bool
}

// Watch streams changes of keys matching filter ("" or ">" for all) until ctx ends. The
// current values come first unless updatesOnly. Values that do not decode are skipped.
func (s *Store[T]) Watch(ctx context.Context, filter string, updatesOnly bool) (<-chan Change[T], error) {
	if filter == "" {
		filter = ">"
	}
	var opts []jetstream.WatchOpt
	if updatesOnly {
		opts = append(opts, jetstream.UpdatesOnly())
	}
	w, err := s.kv.Watch(ctx, filter, opts...)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", filter, err)
	}
	out := make(chan Change[T])
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil { // end of the initial values
					continue
				}
				c := Change[T]{Key: e.Key(), Revision: e.Revision()}
				if e.Operation() != jetstream.KeyValuePut {
					c.Deleted = true
				} else {
					v, err := decode[T](e.Key(), e.Value())
					if err != nil {
						continue
					}
					c.Value = v
				}
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func decode[T any](key string, b []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return v, nil
}
