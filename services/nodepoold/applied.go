package nodepoold

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedMaxAge bounds how long an apply is skipped as unchanged: a field someone else changed
// without moving the object's generation (a label, an annotation) is put back within it.
const appliedMaxAge = 5 * time.Minute

// appliedObjects remembers what nodepoold last applied to each management object and what the
// apiserver answered, so that a reconcile that would send the same object over an unchanged
// one sends nothing. A pool is reconciled on every event of its Machines, and each apply costs
// the management kube-apiserver a full update (read, decode, merge, validate) even when it
// changes nothing: in the 500-machine fleet benchmark these no-op applies were about a fifth of
// its requests (BENCHMARKS.md).
type appliedObjects struct {
	mu    sync.Mutex
	m     map[appliedKey]appliedEntry
	swept time.Time // entries older than appliedMaxAge are dropped once per appliedMaxAge
}

type appliedKey struct {
	kind string
	key  types.NamespacedName
}

// appliedEntry is one apply: the digest of what was sent and the object it left. The object
// is unchanged while its UID and generation are the same (its resourceVersion for kinds
// without a generation, such as Secrets).
type appliedEntry struct {
	sum        [sha256.Size]byte
	uid        types.UID
	generation int64
	rv         string
	at         time.Time
}

func (e appliedEntry) matches(live client.Object) bool {
	if live.GetUID() != e.uid {
		return false
	}
	if e.generation != 0 {
		return live.GetGeneration() == e.generation
	}
	return live.GetResourceVersion() == e.rv
}

// apply writes obj with server-side apply as nodepoold, taking over conflicting fields, unless
// the same obj was applied over the object as it still is (read from cached) less than
// appliedMaxAge ago. It sets obj's apiVersion and kind.
func (a *appliedObjects) apply(ctx context.Context, c client.Client, cached client.Reader, obj client.Object, now time.Time) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	k := appliedKey{kind: gvk.String(), key: client.ObjectKeyFromObject(obj)}
	sum := sha256.Sum256(data)
	a.mu.Lock()
	e, ok := a.m[k]
	a.mu.Unlock()
	if ok && e.sum == sum && now.Sub(e.at) < appliedMaxAge {
		live, _ := obj.DeepCopyObject().(client.Object)
		if live != nil && cached.Get(ctx, k.key, live) == nil && e.matches(live) {
			return nil
		}
	}
	if err := apply(ctx, c, obj); err != nil {
		a.forget(k)
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[appliedKey]appliedEntry{}
	}
	if now.Sub(a.swept) >= appliedMaxAge {
		for old, e := range a.m {
			if now.Sub(e.at) >= appliedMaxAge {
				delete(a.m, old)
			}
		}
		a.swept = now
	}
	a.m[k] = appliedEntry{sum: sum, uid: obj.GetUID(), generation: obj.GetGeneration(), rv: obj.GetResourceVersion(), at: now}
	return nil
}

func (a *appliedObjects) forget(k appliedKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, k)
}
