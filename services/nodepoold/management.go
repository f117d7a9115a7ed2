package nodepoold

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/core/v1beta2/index"
	capicontrollers "sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/kube"
)

// Grace periods of Cluster API's remote connection handling (ARCHITECTURE section 11: the
// conditions grace period must be at least 2m and longer than the connection one).
const (
	remoteConnectionGracePeriod = time.Minute
	remoteConditionsGracePeriod = 5 * time.Minute
)

// management is nodepoold's side of the management cluster: a controller-runtime manager
// whose client reads (cached) and writes the pools' Cluster API objects, which runs Cluster
// API's core controllers when they run in-process, and whose watches wake the pools whose
// Machines, MachineSets or MachineDeployments changed.
type management struct {
	log       *slog.Logger
	rest      *rest.Config
	inProcess bool
	enqueue   func(key string)

	mu  sync.Mutex
	mgr manager.Manager
	// running is mgr's run context: done once mgr is stopped (to be built again, or for good).
	running context.Context
	started atomic.Bool
	// rebuilds counts the manager's restarts after the management apiserver came back.
	rebuilds prometheus.Counter
}

// newManagement reads the management kubeconfig; nothing connects until Start.
func newManagement(kubeconfigFile string, inProcess bool, log *slog.Logger, enqueue func(string), rebuilds prometheus.Counter) (*management, error) {
	kubeconfig, err := os.ReadFile(kubeconfigFile)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig: %w", err)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig %s: %w", kubeconfigFile, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return &management{log: log.With("component", "management"), rest: cfg, inProcess: inProcess, enqueue: enqueue, rebuilds: rebuilds}, nil
}

// ready reports whether the caches are synced (and, in-process, Cluster API runs).
func (m *management) ready() error {
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	if !m.started.Load() || running == nil || running.Err() != nil {
		return fmt.Errorf("%w: Cluster API CRDs or the management caches are not ready yet", ErrManagementNotReady)
	}
	return nil
}

// bind returns a context that ends with ctx or when the current manager stops, whichever is
// first: a reconcile reads and writes the management cluster under it. A read from a
// manager's cache waits until the cache has synced, with no bound but its context's, and a
// manager stopped before its caches synced (the management apiserver restarted again while
// it was starting) never syncs them: without this, the reconcile would wait forever, and its
// pool with it.
func (m *management) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	bound, cancel := context.WithCancelCause(ctx)
	if running == nil {
		cancel(ErrManagementNotReady)
		return bound, func() {}
	}
	stop := context.AfterFunc(running, func() { cancel(errManagerStopped) })
	return bound, func() {
		stop()
		cancel(nil)
	}
}

// errManagerStopped is the cause of a bound context that ended because its manager stopped.
var errManagerStopped = fmt.Errorf("%w: the management manager stopped (the management apiserver went away); retrying with the next one", ErrManagementNotReady)

// client is the manager's client: cached reads of the Cluster API kinds, direct reads of
// Secrets, writes to the apiserver. Only valid once ready.
func (m *management) client() client.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mgr.GetClient()
}

// cache reads the manager's informers: the Cluster API kinds, LocalMachines, the Secrets of
// Cluster API clusters (those labelled with a cluster name, nodepoold's userdata Secrets too).
func (m *management) cache() client.Reader {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mgr.GetCache()
}

// reader reads the management apiserver directly: what nodepoold does not cache (Secrets)
// and what must not be read stale (a deleting pool's Machines).
func (m *management) reader() client.Reader {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mgr.GetAPIReader()
}

// Start installs Cluster API's CRDs (in-process; retrying while the management apiserver is
// unreachable), builds the manager and runs it until ctx ends. When the management apiserver
// goes away and comes back, the manager is stopped and built again with fresh caches: after
// a restart client-go's informers re-list only after a backoff that grows to 30 s over
// repeated failures, and a MachineSet controller reading a cache that old does not see the
// Machines it created and creates them again (docs/resilience.md).
func (m *management) Start(ctx context.Context) error {
	for {
		mgr := m.buildRetrying(ctx)
		if mgr == nil {
			return nil // ctx ended
		}
		runCtx, stop := context.WithCancel(ctx)
		var returned atomic.Bool
		go func() {
			back, err := kube.AwaitReturn(runCtx, m.rest, func(err error) {
				m.log.Warn("management apiserver unreachable", "err", err)
			})
			if err != nil {
				m.log.Error("probe the management apiserver for restarts", "err", err)
			}
			if back {
				returned.Store(true)
				stop()
			}
		}()
		err := m.run(runCtx, mgr)
		stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case returned.Load():
			m.rebuilds.Inc()
			m.log.Info("management apiserver is back; restarting Cluster API's controllers and the caches with a fresh list")
		case err != nil:
			return err
		default:
			return nil
		}
	}
}

// buildRetrying installs the CRDs and builds the manager, 500ms doubling to 5s between
// attempts, until ctx ends (nil then). Building is retried too: the controllers map their
// kinds through discovery, which a management apiserver that just restarted may not serve yet.
func (m *management) buildRetrying(ctx context.Context) manager.Manager {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt}
	var mgr manager.Manager
	if backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err := m.install(ctx)
		if err == nil {
			mgr, err = m.build(ctx)
		}
		if err != nil {
			m.log.Warn("management cluster not ready; retrying", "err", err)
		}
		return err == nil, nil
	}) != nil {
		return nil
	}
	return mgr
}

// run runs mgr until ctx ends, ready while its caches are synced.
func (m *management) run(ctx context.Context, mgr manager.Manager) error {
	m.mu.Lock()
	m.mgr, m.running = mgr, ctx
	m.mu.Unlock()
	go func() {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if ctx.Err() == nil { // still the current manager: run resets started under mu when it stops
			m.started.Store(true)
			m.log.Info("management cluster ready", "cluster_api", map[bool]string{true: ClusterAPIInProcess, false: ClusterAPIExternal}[m.inProcess])
		}
	}()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.started.Store(false)
	}()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("management manager: %w", err)
	}
	return nil
}

// install makes sure the Cluster API CRDs are there: installed in-process, checked otherwise.
func (m *management) install(ctx context.Context) error {
	if m.inProcess {
		return crd.Install(ctx, m.rest, capi.CRDs, Name)
	}
	c, err := client.New(m.rest, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := c.List(ctx, &clusterv1.MachineDeploymentList{}, client.Limit(1)); err != nil {
		return fmt.Errorf("cluster API (external) is not installed in the management cluster: %w", err)
	}
	return nil
}

// scheme holds the kinds nodepoold's clients read and write.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

var (
	setLoggerOnce sync.Once
	gatesOnce     sync.Once
	gatesErr      error
)

// build creates the manager, Cluster API's controllers (in-process) and nodepoold's watches.
func (m *management) build(ctx context.Context) (manager.Manager, error) {
	logger := logr.FromSlogHandler(m.log.Handler())
	// Cluster API logs through controller-runtime's global logger; without one it warns.
	setLoggerOnce.Do(func() { ctrllog.SetLogger(logger) })
	ctx = ctrl.LoggerInto(ctx, logger)

	req, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	skip := true
	mgr, err := manager.New(m.rest, manager.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every nodepoold of a process (tests, restarts) builds controllers of the same names.
		Controller: config.Controller{SkipNameValidation: &skip},
		Cache: cache.Options{
			// Only Secrets of Cluster API clusters are cached (Cluster API's own setting): the
			// ClusterCache reads the <cluster>-kubeconfig Secrets through it.
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)}},
		},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor:   []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
			Unstructured: true,
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("management manager: %w", err)
	}
	if m.inProcess {
		if err := setupClusterAPI(ctx, mgr); err != nil {
			return nil, fmt.Errorf("cluster API controllers: %w", err)
		}
	}
	if err := m.setupWatches(mgr); err != nil {
		return nil, err
	}
	// The kinds the pools are read from, registered before the cache starts: its
	// WaitForCacheSync (run's "ready") covers only the informers it has, and the controllers
	// add theirs only once they start, so without these it would say synced at once.
	for _, obj := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.MachineSet{}, &clusterv1.Machine{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("management cache of %T: %w", obj, err)
		}
	}
	return mgr, nil
}

// setupClusterAPI adds Cluster API v1.12's core controllers to mgr the way its main.go does,
// without webhooks, metrics or the kinds hostplane does not use (MachinePool,
// ClusterResourceSet, ClusterClass and topology, the runtime SDK).
func setupClusterAPI(ctx context.Context, mgr manager.Manager) error {
	// hostplane uses no MachinePool: the controllers must not watch it (its CRD is installed
	// only because clusterctl describe lists MachinePools; see pkg/crd/capi).
	gatesOnce.Do(func() { gatesErr = feature.MutableGates.Set(string(feature.MachinePool) + "=false") })
	if gatesErr != nil {
		return gatesErr
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	secretCachingClient, err := client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Cache:      &client.CacheOptions{Reader: mgr.GetCache()},
	})
	if err != nil {
		return err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        clustercache.CacheOptions{Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex}},
		Client: clustercache.ClientOptions{
			UserAgent: remote.DefaultClusterAPIUserAgent(Name),
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{
				// As Cluster API: never cache what drains and volume waits list.
				&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}, &appsv1.DaemonSet{},
				&corev1.PersistentVolume{}, &storagev1.VolumeAttachment{},
			}},
		},
	}, controller.Options{MaxConcurrentReconciles: 10})
	if err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	// A guest control plane here is up seconds after its cluster: retry a failed connection
	// after 3s, not Cluster API's 30s, or a cluster's first pool waits half a minute
	// (BENCHMARKS.md). The setter is on the implementation, not the interface.
	if s, ok := clusterCache.(interface{ SetConnectionCreationRetryInterval(time.Duration) }); ok {
		s.SetConnectionCreationRetryInterval(3 * time.Second)
	}
	opts := controller.Options{MaxConcurrentReconciles: 10}
	if err := (&capicontrollers.ClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("Cluster controller: %w", err)
	}
	if err := (&capicontrollers.MachineReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("Machine controller: %w", err)
	}
	if err := (&capicontrollers.MachineSetReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{}, // none: the control plane is hostplane's
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("MachineSet controller: %w", err)
	}
	if err := (&capicontrollers.MachineDeploymentReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("MachineDeployment controller: %w", err)
	}
	if err := (&capicontrollers.MachineHealthCheckReconciler{
		Client: mgr.GetClient(), ClusterCache: clusterCache,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("MachineHealthCheck controller: %w", err)
	}
	return nil
}

// setupWatches wakes a pool when one of its Cluster API objects changes: a Machine got its
// node, a MachineSet scaled, a MachineDeployment rolled.
func (m *management) setupWatches(mgr manager.Manager) error {
	toPool := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrlreconcile.Request {
		l := o.GetLabels()
		cluster, pool := l[api.LabelCluster], l[api.LabelNodePool]
		if cluster == "" || pool == "" {
			return nil
		}
		return []ctrlreconcile.Request{{NamespacedName: types.NamespacedName{Name: api.NodePoolKey(cluster, pool)}}}
	})
	err := builder.ControllerManagedBy(mgr).
		Named(Name+"-pools").
		Watches(&clusterv1.Machine{}, toPool).
		Watches(&clusterv1.MachineSet{}, toPool).
		Watches(&clusterv1.MachineDeployment{}, toPool).
		Complete(ctrlreconcile.Func(func(_ context.Context, req ctrlreconcile.Request) (ctrlreconcile.Result, error) {
			m.enqueue(req.Name)
			return ctrlreconcile.Result{}, nil
		}))
	if err != nil {
		return fmt.Errorf("pool watches: %w", err)
	}
	return nil
}
