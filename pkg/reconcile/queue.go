package reconcile

import (
	"sync"
	"time"
)

// queue is a keyed FIFO with the guarantees the package doc promises: a key waits in the
// queue at most once, and a key being processed is not handed out again until Done; adding it
// meanwhile marks it dirty so it is re-queued on Done.
type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	order      []string
	dirty      map[string]bool
	processing map[string]bool
	timers     map[string]*time.Timer
	shutdown   bool
}

func newQueue() *queue {
	q := &queue{dirty: map[string]bool{}, processing: map[string]bool{}, timers: map[string]*time.Timer{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *queue) addLocked(key string) {
	if q.shutdown || q.dirty[key] {
		return
	}
	q.dirty[key] = true
	if q.processing[key] {
		return
	}
	q.order = append(q.order, key)
	q.cond.Signal()
}

// addAfter adds key after d. An earlier pending timer for the key wins over a later one.
func (q *queue) addAfter(key string, d time.Duration) {
	if d <= 0 {
		q.add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if t, ok := q.timers[key]; ok {
		t.Stop()
	}
	q.timers[key] = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.timers, key)
		q.addLocked(key)
	})
}

// get blocks for the next key; ok is false once the queue is shut down.
func (q *queue) get() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	key, q.order = q.order[0], q.order[1:]
	delete(q.dirty, key)
	q.processing[key] = true
	return key, true
}

func (q *queue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] && !q.shutdown {
		q.order = append(q.order, key)
		q.cond.Signal()
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	for k, t := range q.timers {
		t.Stop()
		delete(q.timers, k)
	}
	q.cond.Broadcast()
}
