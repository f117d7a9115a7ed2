package nodepoold

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/guest"
)

// nodeWatches keeps one Node informer per guest cluster, so that a pool's reconcile reads the
// guest's Nodes from memory rather than listing them from its kube-apiserver each time (in the
// 500-machine fleet that LIST was a guest kube-apiserver's largest handler mid-ramp,
// BENCHMARKS.md). A Node that appears, goes, or changes what nodepoold reads of it (its labels,
// annotations, taints, cordon, Ready condition) enqueues its pool; a watch that starts failing,
// and one that is back, enqueues the cluster, whose pools then say how they read the guest. A
// kube-apiserver that exits closes the watch and is noticed at once; one that hangs with its
// connections open is noticed only when the watch times out (minutes), as with any informer.
//
// An informer is restarted for a new guest client (the PKI serial or the server changed) and
// stopped when its cluster hibernates, goes or has no pool left. While one is not synced or
// its watch is failing, the reconcile lists the Nodes itself (guestNodes), so status never
// reports from a cache that stopped following the guest. It is a daemon.Runnable: Start
// returns once ctx ends and every informer stopped.
type nodeWatches struct {
	log     *slog.Logger
	enqueue func(key string)

	mu      sync.Mutex
	ctx     context.Context // parent of every informer; nil until Start, done after it
	byName  map[string]*nodeWatch
	running func(n int) // reports the number of informers (a gauge)
}

// nodeWatch is one guest cluster's Node informer.
type nodeWatch struct {
	client   *guest.Client
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	done     chan struct{}

	mu sync.Mutex
	// failing: the informer's last list or watch call failed (the reflector retries a refused
	// watch on its own, without telling: its calls are what say whether it follows the guest).
	failing bool
}

func newNodeWatches(log *slog.Logger, enqueue func(string), running func(int)) *nodeWatches {
	return &nodeWatches{log: log, enqueue: enqueue, running: running, byName: map[string]*nodeWatch{}}
}

// Start lets informers start, waits for ctx to end, then stops every one.
func (ws *nodeWatches) Start(ctx context.Context) error {
	ws.mu.Lock()
	ws.ctx = ctx
	ws.mu.Unlock()
	<-ctx.Done()
	ws.mu.Lock()
	all := ws.byName
	ws.byName = map[string]*nodeWatch{}
	ws.running(0)
	ws.mu.Unlock()
	for _, w := range all {
		w.stop()
	}
	return nil
}

// nodes returns cluster's Nodes by name from its informer, starting it (or restarting it for
// a new client g) first. ok is false while the informer has not synced or its watch is
// failing (and before Start or after it returned): the caller lists the Nodes itself. The
// Nodes are the informer's: read them, never change them.
func (ws *nodeWatches) nodes(cluster string, g *guest.Client) (map[string]*corev1.Node, bool) {
	w := ws.ensure(cluster, g)
	if w == nil || !w.informer.HasSynced() || w.isFailing() {
		return nil, false
	}
	objs := w.informer.GetStore().List()
	out := make(map[string]*corev1.Node, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out[n.Name] = n
		}
	}
	return out, true
}

// ensure returns cluster's informer for g, starting it when there is none or the running one
// uses another client; nil before Start or after it returned.
func (ws *nodeWatches) ensure(cluster string, g *guest.Client) *nodeWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.ctx == nil || ws.ctx.Err() != nil {
		return nil
	}
	old := ws.byName[cluster]
	if old != nil && old.client == g {
		return old
	}
	if old != nil {
		old.stop()
		ws.log.Info("restarting the guest Node informer for a new client", "cluster", cluster, "serial", g.Serial)
	}
	w := ws.start(cluster, g)
	ws.byName[cluster] = w
	ws.running(len(ws.byName))
	return w
}

// stop stops cluster's informer, if one runs.
func (ws *nodeWatches) stop(cluster, why string) {
	ws.mu.Lock()
	w := ws.byName[cluster]
	delete(ws.byName, cluster)
	ws.running(len(ws.byName))
	ws.mu.Unlock()
	if w != nil {
		w.stop()
		ws.log.Info("stopped the guest Node informer", "cluster", cluster, "why", why)
	}
}

// start runs an informer on g's clientset; ws.mu is held.
func (ws *nodeWatches) start(cluster string, g *guest.Client) *nodeWatch {
	ctx, cancel := context.WithCancel(ws.ctx)
	w := &nodeWatch{client: g, cancel: cancel, done: make(chan struct{})}
	// report follows the informer's calls to the guest: the first failure and the first
	// success after failures enqueue the cluster, whose pools then say so in their status.
	report := func(err error) {
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		changed := w.failing != (err != nil)
		w.failing = err != nil
		w.mu.Unlock()
		switch {
		case !changed:
			return
		case err != nil:
			ws.log.Warn("lost the guest cluster's Node watch; its pools list Nodes directly until it is back", "cluster", cluster, "err", err)
		default:
			ws.log.Info("the guest cluster's Node watch is back", "cluster", cluster)
		}
		ws.enqueue(cluster)
	}
	nodes := g.Clientset.CoreV1().Nodes()
	w.informer = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := nodes.List(ctx, o)
			report(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := nodes.Watch(ctx, o)
			report(err)
			return wi, err
		},
	}, &corev1.Node{}, 0, cache.Indexers{})
	// Managed fields are never read here: not keeping them halves what a Node weighs.
	_ = w.informer.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	// The reflector's own failures (a list refused, a watch ended with an error) are
	// reported through the calls above; it need not log them a second time.
	_ = w.informer.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	poolOf := func(n *corev1.Node) {
		if pool := n.Labels[api.LabelNodePool]; pool != "" {
			ws.enqueue(api.NodePoolKey(cluster, pool))
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if n, ok := obj.(*corev1.Node); ok && !initial {
				poolOf(n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && !sameToNodepoold(o, n) {
				poolOf(o)
				if n.Labels[api.LabelNodePool] != o.Labels[api.LabelNodePool] {
					poolOf(n)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				poolOf(n)
			}
		},
	})
	go func() {
		defer close(w.done)
		w.informer.RunWithContext(ctx)
	}()
	ws.log.Info("watching the guest cluster's Nodes", "cluster", cluster, "serial", g.Serial)
	return w
}

func (w *nodeWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *nodeWatch) isFailing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failing
}

// sameToNodepoold reports whether a and b agree on everything a pool's reconcile reads of a
// Node: labels, annotations, taints, cordon, and the Ready condition (not its heartbeat).
func sameToNodepoold(a, b *corev1.Node) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		a.Spec.Unschedulable == b.Spec.Unschedulable &&
		slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, func(x, y corev1.Taint) bool { return x.MatchTaint(&y) && x.Value == y.Value }) &&
		readyOf(a) == readyOf(b)
}

// readyOf is a Node's Ready condition without its times.
func readyOf(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("%s/%s/%s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}
