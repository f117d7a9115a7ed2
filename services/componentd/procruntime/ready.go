package procruntime

import (
	"context"
	"sync"

	"github.com/hostplane/hostplane/pkg/process"
)

// readyNotifier re-enqueues a cluster the moment a replica the runtime started passes its
// probe, so the next component of the rollout starts without waiting for the periodic
// re-check (componentd's ProgressInterval). Runtime.Start runs it: it owns the goroutines
// that wait and ends them when the daemon stops.
type readyNotifier struct {
	enqueue func(cluster string)

	mu     sync.Mutex
	ctx    context.Context
	closed bool
	wg     sync.WaitGroup
}

// reset readies the notifier for another run: it watches nothing until Start.
func (n *readyNotifier) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ctx, n.closed = nil, false
}

// Start records the run context and, once it ends, waits for every watcher to return.
func (n *readyNotifier) Start(ctx context.Context) error {
	n.mu.Lock()
	n.ctx = ctx
	n.mu.Unlock()
	<-ctx.Done()
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.wg.Wait()
	return nil
}

// watch enqueues cluster once p is ready (nothing if p stops or the daemon stops first).
func (n *readyNotifier) watch(p *process.Process, cluster string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx == nil || n.closed {
		return
	}
	ctx := n.ctx
	n.wg.Go(func() {
		if p.WaitReady(ctx) == nil {
			n.enqueue(cluster)
		}
	})
}
