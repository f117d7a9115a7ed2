package infrad

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/localcloud"
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs holds the provider's CustomResourceDefinitions (LocalCluster, LocalMachine,
// LocalMachineTemplate) at its root, for crd.Install.
var CRDs, _ = fs.Sub(crdFiles, "crds")

// LeaderElectionID is the Lease the machines manager holds with Config.LeaderElection.
const LeaderElectionID = "infrad-machines.hostplane.dev"

// cloud is what the provider needs of the local cloud (*localcloud.Client).
type cloud interface {
	Create(ctx context.Context, spec localcloud.MachineSpec) (localcloud.MachineStatus, error)
	Get(ctx context.Context, cluster, name string) (localcloud.MachineStatus, error)
	List(ctx context.Context, cluster string) ([]localcloud.MachineStatus, error)
	Delete(ctx context.Context, cluster, name string) error
	Fault(ctx context.Context, cluster, name, fault string) (localcloud.MachineStatus, error)
	Reconfigure(ctx context.Context, cluster, name string, userData []byte) (localcloud.MachineStatus, error)
	Power(ctx context.Context, cluster, name string, on bool) (localcloud.MachineStatus, error)
}

var _ cloud = (*localcloud.Client)(nil)

// provider is the local platform's Cluster API infrastructure provider: a controller-runtime
// manager on the management cluster with the LocalMachine controller, and the LocalCluster
// writer (a NATS controller beside the endpoint one). It exists only with a management
// kubeconfig; its cloud only with a local cloud URL.
type provider struct {
	d      *Daemon
	log    *slog.Logger
	rest   *rest.Config
	mgr    manager.Manager
	client client.Client // cached reads (Machines, LocalMachines), direct writes
	reader client.Reader // uncached reads (Secrets, lists the HTTP API answers)
	cloud  cloud         // nil: no local cloud configured
	resync time.Duration

	started atomic.Bool // CRDs installed and caches synced
	phases  *phaseGauge
}

// newProvider builds the provider (nothing connects yet; start does).
func (d *Daemon) newProvider() (*provider, error) {
	kubeconfig, err := os.ReadFile(d.cfg.ManagementKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig: %w", err)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	skip := true
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(d.log.With("component", "machines").Handler()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         d.cfg.LeaderElection,
		LeaderElectionID:       LeaderElectionID,
		// LeaderElectionNamespace: the manager's default (the in-cluster namespace) does not
		// exist outside a pod.
		LeaderElectionNamespace: metav1.NamespaceDefault,
		// Every infrad of a process (tests, restarts) builds a controller of the same name.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("machines manager: %w", err)
	}
	p := &provider{
		d: d, log: d.log, rest: cfg, mgr: mgr,
		client: mgr.GetClient(), reader: mgr.GetAPIReader(),
		resync: d.cfg.MachineResync, phases: newPhaseGauge(d.metrics.machines),
	}
	if d.cfg.LocalCloudURL != "" {
		c, err := localcloud.NewClient(d.cfg.LocalCloudURL)
		if err != nil {
			return nil, fmt.Errorf("local cloud %q: %w", d.cfg.LocalCloudURL, err)
		}
		p.cloud = c
	} else {
		d.log.Warn("no local cloud configured (--localcloud-url, HOSTPLANE_LOCALCLOUD_URL): LocalMachines are not provisioned")
	}
	if err := p.setupMachineController(); err != nil {
		return nil, err
	}
	return p, nil
}

// Start installs the CRDs and waits for Cluster API's Machine CRD (nodepoold installs it),
// retrying while the management apiserver is unreachable, then runs the manager until ctx
// ends.
func (p *provider) Start(ctx context.Context) error {
	if !p.retry(ctx, "install the infrastructure CRDs", func() error { return crd.Install(ctx, p.rest, CRDs, Name) }) ||
		!p.retry(ctx, "wait for Cluster API's Machine CRD", func() error { return crdEstablished(ctx, p.rest, machineCRD) }) {
		return nil
	}
	go func() {
		if p.mgr.GetCache().WaitForCacheSync(ctx) {
			p.started.Store(true)
			p.log.Info("machines provider started", "localcloud", p.d.cfg.LocalCloudURL)
		}
	}()
	if err := p.mgr.Start(ctx); err != nil {
		return fmt.Errorf("machines manager: %w", err)
	}
	return nil
}

// machineCRD is Cluster API's Machine CRD, which the LocalMachine controller watches.
const machineCRD = "machines.cluster.x-k8s.io"

// retry runs step until it succeeds (true) or ctx ends (false), 250ms doubling to 10s
// apart, logging the first failure as a warning and later ones at debug level.
func (p *provider) retry(ctx context.Context, what string, step func() error) bool {
	backoff := wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Steps: math.MaxInt}
	level := slog.LevelWarn
	err := backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err := step()
		if err != nil {
			p.log.Log(ctx, level, what+"; retrying", "err", err)
			level = slog.LevelDebug
		}
		return err == nil, nil
	})
	return err == nil
}

// crdEstablished reports nil once the CRD called name is established.
func crdEstablished(ctx context.Context, cfg *rest.Config, name string) error {
	cs, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("crd %s is not established yet", name)
}

// ready reports whether the provider serves.
func (p *provider) ready() error {
	if !p.started.Load() {
		return errors.New("the machines provider has not started (infrastructure CRDs, management cluster caches)")
	}
	return nil
}

// LocalCluster: one per cluster whose infra record is ready, in the cluster's namespace.

// localClusterController writes the clusters' LocalClusters on cluster and infra events.
func (p *provider) localClusterController(rt *daemon.Runtime) (*reconcile.Controller, error) {
	return rt.Controller(reconcile.Config{
		Name:           Name + "-localcluster",
		FilterSubjects: []string{events.ClusterFilter(events.ResourceCluster), events.ClusterFilter(events.ResourceInfra)},
		ListKeys:       p.localClusterKeys,
	}, reconcile.Func(p.reconcileLocalCluster))
}

// localClusterKeys is every cluster with a record plus every LocalCluster infrad wrote (so
// one whose cluster vanished while infrad was down is removed).
func (p *provider) localClusterKeys(ctx context.Context) ([]string, error) {
	keys, err := reconcile.ClusterKeys(p.d.infra, p.d.clusters)(ctx)
	if err != nil || !p.started.Load() {
		return keys, err
	}
	var list LocalClusterList
	if err := p.reader.List(ctx, &list, client.MatchingLabels{api.LabelOwner: Name}); err != nil {
		return nil, fmt.Errorf("list LocalClusters: %w", err)
	}
	for _, lc := range list.Items {
		if c := lc.Labels[api.LabelCluster]; c != "" {
			keys = append(keys, c)
		}
	}
	return keys, nil
}

// reconcileLocalCluster makes the cluster's LocalCluster follow its infra record: written
// once the record is ready (never again once the cluster is deleting: Cluster API deletes
// it then), deleted once the record or the cluster is gone.
func (p *provider) reconcileLocalCluster(ctx context.Context, cluster string) (reconcile.Result, error) {
	if !p.started.Load() {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	c, _, err := p.d.clusters.Get(ctx, cluster)
	clusterGone := errors.Is(err, store.ErrNotFound)
	if err != nil && !clusterGone {
		return reconcile.Result{}, err
	}
	inf, _, err := p.d.infra.Get(ctx, cluster)
	infraGone := errors.Is(err, store.ErrNotFound)
	if err != nil && !infraGone {
		return reconcile.Result{}, err
	}
	switch {
	case clusterGone || infraGone:
		return reconcile.Result{}, p.deleteLocalCluster(ctx, cluster)
	case c.DeletionTimestamp != nil || !inf.Ready:
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, p.applyLocalCluster(ctx, cluster, inf)
}

// applyLocalCluster writes the LocalCluster (and its namespace, if missing) with
// server-side apply: spec.controlPlaneEndpoint, then status.initialization.provisioned.
func (p *provider) applyLocalCluster(ctx context.Context, cluster string, inf *api.Infra) error {
	ns := api.ControlPlaneNamespace(cluster)
	if err := p.ensureNamespace(ctx, ns, cluster); err != nil {
		return err
	}
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(InfrastructureGroupVersion.String())
		u.SetKind(api.KindLocalCluster)
		u.SetNamespace(ns)
		u.SetName(cluster)
		return u
	}
	spec := obj()
	spec.SetLabels(map[string]string{api.LabelOwner: Name, api.LabelCluster: cluster, clusterv1.ClusterNameLabel: cluster})
	spec.Object["spec"] = map[string]any{"controlPlaneEndpoint": map[string]any{
		"host": inf.Endpoint.Host, "port": int64(inf.Endpoint.Port),
	}}
	opts := []client.PatchOption{client.FieldOwner(Name), client.ForceOwnership}
	if err := p.client.Patch(ctx, spec, client.Apply, opts...); err != nil {
		return fmt.Errorf("apply LocalCluster %s/%s: %w", ns, cluster, err)
	}
	status := obj()
	status.Object["status"] = map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"conditions":     localClusterConditions(spec),
	}
	if err := p.client.Status().Patch(ctx, status, client.Apply, client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply LocalCluster %s/%s status: %w", ns, cluster, err)
	}
	return nil
}

// localClusterConditions are the LocalCluster's v1beta2 conditions: Ready True once its
// endpoint is allocated, as Cluster API's tools (clusterctl describe cluster) show an
// infrastructure cluster by its Ready condition (no message: Cluster API's convention for a
// healthy condition, whose message would reach the Cluster's Available summary). cur is the LocalCluster as the apiserver
// answered the spec's apply; its Ready condition's lastTransitionTime is kept while the
// status stays the same.
func localClusterConditions(cur *unstructured.Unstructured) []any {
	since := time.Now().UTC()
	raw, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok || m["type"] != ConditionReady || m["status"] != string(metav1.ConditionTrue) {
			continue
		}
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				since = t
			}
		}
	}
	return []any{map[string]any{
		"type": ConditionReady, "status": string(metav1.ConditionTrue), "reason": ReasonProvisioned, "message": "",
		"observedGeneration": cur.GetGeneration(), "lastTransitionTime": since.UTC().Format(time.RFC3339),
	}}
}

// deleteLocalCluster deletes the cluster's LocalCluster; gone already (Cluster API deleted it
// with the Cluster) is fine: it carries no finalizer.
func (p *provider) deleteLocalCluster(ctx context.Context, cluster string) error {
	lc := &LocalCluster{ObjectMeta: metav1.ObjectMeta{Namespace: api.ControlPlaneNamespace(cluster), Name: cluster}}
	err := p.client.Delete(ctx, lc)
	if err == nil {
		p.log.Info("deleted the LocalCluster", "cluster", cluster)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete LocalCluster of %s: %w", cluster, err)
	}
	return nil
}

// ensureNamespace creates the cluster's namespace unless it exists (another daemon may have
// created it; infrad never changes or deletes it).
func (p *provider) ensureNamespace(ctx context.Context, ns, cluster string) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		api.LabelOwner: Name, api.LabelCluster: cluster,
	}}}
	if err := p.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}
