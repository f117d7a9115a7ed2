package pkid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/store"
)

const (
	// csrResync re-examines every CSR of a guest cluster that often, so a pending CSR whose
	// Machine appeared after the retries ended is still approved.
	csrResync = time.Minute
	// csrRetryWindow is how long after its creation a CSR waiting for its Machine is retried
	// with backoff (csrRetryMin doubling up to csrRetryMax); after that the resync covers it.
	csrRetryWindow = 5 * time.Minute
	csrRetryMin    = 250 * time.Millisecond
	csrRetryMax    = 10 * time.Second
	// machineLookupTimeout bounds one read of the management cluster.
	machineLookupTimeout = 10 * time.Second
)

// approver approves the kubelet client CSRs of every guest cluster whose PKI is ready: one
// CSR informer per cluster on the guest's admin client, restarted when the PKI serial changes.
// It is a daemon.Runnable: Start returns once ctx ends and every watcher stopped.
type approver struct {
	log      *slog.Logger
	clients  *guest.Clients
	machines client.Reader // Cluster API's Machines in the management cluster
	pools    *store.Store[api.NodePool]
	metrics  *metrics

	ctx    context.Context // parent of every watcher; cancelled when Start returns
	cancel context.CancelFunc

	mu       sync.Mutex
	watchers map[string]*csrWatcher // by cluster
}

func newApprover(log *slog.Logger, clients *guest.Clients, machines client.Reader, pools *store.Store[api.NodePool], m *metrics) *approver {
	ctx, cancel := context.WithCancel(context.Background())
	return &approver{
		log: log, clients: clients, machines: machines, pools: pools, metrics: m,
		ctx: ctx, cancel: cancel, watchers: map[string]*csrWatcher{},
	}
}

// Start waits for ctx to end, then stops every watcher.
func (a *approver) Start(ctx context.Context) error {
	<-ctx.Done()
	a.mu.Lock()
	a.cancel()
	ws := a.watchers
	a.watchers = map[string]*csrWatcher{}
	a.metrics.approvers.Set(0)
	a.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	return nil
}

// running reports the PKI serial cluster's watcher runs with, or "" when none runs.
func (a *approver) running(cluster string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.watchers[cluster]; w != nil {
		return w.serial
	}
	return ""
}

// ensure runs cluster's watcher with the admin client of the current PKI serial, replacing
// a watcher of an older serial.
func (a *approver) ensure(ctx context.Context, cluster string) error {
	c, err := a.clients.For(ctx, cluster)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return nil // stopping
	}
	old := a.watchers[cluster]
	if old != nil && old.serial == c.Serial {
		return nil
	}
	if old != nil {
		old.stop()
		a.log.Info("restarting the CSR approver for a new pki serial", "cluster", cluster, "serial", c.Serial)
	} else {
		a.log.Info("approving kubelet CSRs of Machines", "cluster", cluster, "serial", c.Serial)
	}
	a.watchers[cluster] = a.start(cluster, c)
	a.metrics.approvers.Set(float64(len(a.watchers)))
	return nil
}

// stop stops cluster's watcher, if any.
func (a *approver) stop(cluster string) {
	a.mu.Lock()
	w := a.watchers[cluster]
	delete(a.watchers, cluster)
	a.metrics.approvers.Set(float64(len(a.watchers)))
	a.mu.Unlock()
	if w != nil {
		w.stop()
		a.clients.Forget(cluster)
		a.log.Info("stopped the CSR approver", "cluster", cluster)
	}
}

// csrWatcher is the CSR informer and work queue of one guest cluster.
type csrWatcher struct {
	a       *approver
	cluster string
	serial  string
	log     *slog.Logger
	cs      kubernetes.Interface
	lister  certlisters.CertificateSigningRequestLister
	queue   workqueue.TypedRateLimitingInterface[string]
	cancel  context.CancelFunc
	done    chan struct{}

	mu   sync.Mutex
	seen map[string]string // CSR UID → the outcome last logged and counted
}

func (a *approver) start(cluster string, c *guest.Client) *csrWatcher {
	ctx, cancel := context.WithCancel(a.ctx)
	factory := informers.NewSharedInformerFactory(c.Clientset, csrResync)
	inf := factory.Certificates().V1().CertificateSigningRequests()
	w := &csrWatcher{
		a: a, cluster: cluster, serial: c.Serial, log: a.log.With("cluster", cluster),
		cs: c.Clientset, lister: inf.Lister(), cancel: cancel, done: make(chan struct{}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](csrRetryMin, csrRetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pkid-csr-" + cluster}),
		seen: map[string]string{},
	}
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			w.queue.Add(csr.Name)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
				w.forget(string(csr.UID))
			}
		},
	})
	factory.Start(ctx.Done())
	go func() {
		defer close(w.done)
		defer factory.Shutdown()
		go func() {
			<-ctx.Done()
			w.queue.ShutDown()
		}()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			return
		}
		// The guest answers now: give the identities pkid issues their permissions there.
		go w.grant(ctx)
		for w.next(ctx) {
		}
	}()
	return w
}

func (w *csrWatcher) stop() {
	w.cancel()
	<-w.done
}

// next handles one queued CSR; false once the queue shut down.
func (w *csrWatcher) next(ctx context.Context) bool {
	name, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(name)
	retry, err := w.handle(ctx, name)
	switch {
	case err != nil && ctx.Err() == nil:
		w.log.Warn("handle a CSR", "csr", name, "err", err)
		w.queue.AddRateLimited(name)
	case retry:
		w.queue.AddRateLimited(name)
	default:
		w.queue.Forget(name)
	}
	return true
}

// handle decides one CSR and approves it when it names a Machine of the cluster. retry asks
// for another look soon (the Machine may not be visible yet).
func (w *csrWatcher) handle(ctx context.Context, name string) (retry bool, err error) {
	csr, err := w.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if decided(csr) {
		w.forget(string(csr.UID))
		return false, nil
	}
	d, err := w.decide(ctx, csr)
	if err != nil {
		return false, err
	}
	if d.approved() {
		if err := w.approve(ctx, csr, d); err != nil {
			return false, err
		}
	}
	w.record(csr, d)
	return d.retriable() && time.Since(csr.CreationTimestamp.Time) < csrRetryWindow, nil
}

// decide inspects csr and, when it is well formed, looks up the Machine it names.
func (w *csrWatcher) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (decision, error) {
	c, early := inspect(csr)
	if early != nil {
		return *early, nil
	}
	if c.nodePool != "" {
		_, err := w.cs.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		switch {
		case err == nil:
			return nodeExists(c), nil
		case !kube.IsNotFound(err):
			return decision{}, fmt.Errorf("read Node %s: %w", c.node, err)
		}
	}
	m, err := w.a.machine(ctx, w.cluster, c.node)
	if err != nil {
		return decision{}, err
	}
	if m == nil {
		// No Machine: a node of a platform-none pool, whose machines the user provisions?
		pool, err := w.nodePool(ctx, c)
		if err != nil {
			return decision{}, err
		}
		if pool != nil {
			return judgeUnmanaged(c, pool), nil
		}
	}
	return judge(w.cluster, c, m), nil
}

// nodePool is the pool a claim without a Machine belongs to: the bootstrap token's, or for a
// renewal the pool its guest Node is labelled with; nil when there is none.
func (w *csrWatcher) nodePool(ctx context.Context, c claim) (*api.NodePool, error) {
	name := c.nodePool
	if name == "" {
		n, err := w.cs.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if kube.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read Node %s: %w", c.node, err)
		}
		if name = n.Labels[api.LabelNodePool]; name == "" {
			return nil, nil
		}
	}
	pool, _, err := w.a.pools.Get(ctx, api.NodePoolKey(w.cluster, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return pool, err
}

// approve adds the Approved condition; kube-controller-manager signs with kubelet-signer.
func (w *csrWatcher) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d decision) error {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:           certificatesv1.CertificateApproved,
		Status:         corev1.ConditionTrue,
		Reason:         ApprovalReason,
		Message:        "approved by pkid: " + d.Reason,
		LastUpdateTime: metav1.Now(),
	})
	_, err := w.cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: Name})
	if err != nil {
		return fmt.Errorf("approve CSR %s: %w", csr.Name, err)
	}
	return nil
}

// record logs and counts d once per CSR and outcome.
func (w *csrWatcher) record(csr *certificatesv1.CertificateSigningRequest, d decision) {
	uid := string(csr.UID)
	w.mu.Lock()
	same := w.seen[uid] == d.Outcome
	w.seen[uid] = d.Outcome
	w.mu.Unlock()
	if same {
		return
	}
	w.a.metrics.csrDecided(d.Outcome)
	attrs := []any{"csr", csr.Name, "outcome", d.Outcome, "reason", d.Reason, "requester", csr.Spec.Username}
	if d.Node != "" {
		attrs = append(attrs, "machine", d.Node)
	}
	if d.NodePool != "" {
		attrs = append(attrs, "nodepool", d.NodePool)
	}
	if d.approved() {
		w.log.Info("approved a kubelet CSR", attrs...)
		return
	}
	w.log.Info("left a CSR pending", attrs...)
}

func (w *csrWatcher) forget(uid string) {
	w.mu.Lock()
	delete(w.seen, uid)
	w.mu.Unlock()
}

// decided reports whether csr was approved, denied or failed already.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return true
		}
	}
	return false
}

// machine reads the Machine called name in cluster's control-plane namespace of the
// management cluster; nil when there is none (or Cluster API's CRDs are not installed yet).
func (a *approver) machine(ctx context.Context, cluster, name string) (*machineFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, machineLookupTimeout)
	defer cancel()
	ns := api.ControlPlaneNamespace(cluster)
	var m clusterv1.Machine
	err := a.machines.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m)
	switch {
	case kube.IsNotFound(err): // no such Machine, or no Machine CRD yet
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read Machine %s/%s: %w", ns, name, err)
	}
	return &machineFacts{Namespace: ns, Name: name, Labels: m.Labels, Annotations: m.Annotations, Deleting: m.DeletionTimestamp != nil}, nil
}
