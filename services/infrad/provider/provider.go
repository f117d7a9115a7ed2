// Package provider is the local platform's Cluster API infrastructure provider, run by infrad.
//
// It owns the infrastructure.hostplane.dev kinds (their Go types in the apis module's
// infrastructure/v1alpha1, imported as infrav1: LocalCluster, LocalMachine,
// LocalMachineTemplate; their CRDs in crds/, installed by Start) and two controllers:
//
//   - the LocalMachine controller (machines.go), a controller-runtime controller on the
//     management cluster, which provisions each LocalMachine in the local cloud once its
//     Machine has bootstrap data, applies in-place userdata changes, copies the cloud's status
//     back, publishes the machine events and deletes the cloud machine with the LocalMachine;
//   - the LocalCluster writer (localcluster.go), a NATS controller over infrad's "infra"
//     records, which writes each cluster's LocalCluster once its endpoint is allocated.
//
// actions.go answers what infrad's HTTP API and inbox ask of the machines: list them, inject a
// fault, delete a Machine for a termination notice. infrad builds a Provider only with a
// management cluster; the local cloud is optional (without it LocalMachines say why they are
// not provisioned).
package provider

import (
	"cmp"
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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/outbox"
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

// Cloud is what the provider needs of the local cloud (*localcloud.Client).
type Cloud interface {
	Create(ctx context.Context, spec localcloud.MachineSpec) (localcloud.MachineStatus, error)
	Get(ctx context.Context, cluster, name string) (localcloud.MachineStatus, error)
	List(ctx context.Context, cluster string) ([]localcloud.MachineStatus, error)
	Delete(ctx context.Context, cluster, name string) error
	Fault(ctx context.Context, cluster, name, fault string) (localcloud.MachineStatus, error)
	Reconfigure(ctx context.Context, cluster, name string, userData []byte) (localcloud.MachineStatus, error)
	Power(ctx context.Context, cluster, name string, on bool) (localcloud.MachineStatus, error)
}

var _ Cloud = (*localcloud.Client)(nil)

var _ daemon.Runnable = (*Provider)(nil)

// Config is what the provider needs; every field but LocalCloudURL, Resync and
// LeaderElection is required.
type Config struct {
	// Owner is the daemon running the provider: the field manager of what it applies, the
	// owner label of the objects it creates and the prefix of its NATS controller's name.
	Owner string
	// Kubeconfig is the path of the management cluster's kubeconfig.
	Kubeconfig string
	// LocalCloudURL is the local cloud's API, "unix:///abs.sock" or "http://host:port"; empty:
	// LocalMachines are not provisioned (their Ready condition says so).
	LocalCloudURL string
	// LocalCloudTokenFile, when not "", holds the bearer token the local cloud asks for.
	LocalCloudTokenFile string
	// Resync is how often a running machine's status is read from the local cloud again
	// (default DefaultResync).
	Resync time.Duration
	// LeaderElection makes the machines manager hold the Lease LeaderElectionID.
	LeaderElection bool
	// Log is the daemon's logger.
	Log *slog.Logger
	// Metrics are the machines' series (NewMetrics).
	Metrics *Metrics
	// Outbox records the machine events before they are published.
	Outbox *outbox.Outbox
	// Docker is the docker platform's machines (infrad's dockercloud); nil: machines of
	// platform-docker clusters are not provisioned, and say so.
	Docker Cloud
	// Infra and Clusters are the records the LocalClusters follow.
	Infra    *store.Store[api.Infra]
	Clusters *store.Store[api.Cluster]
}

func (c *Config) validate() error {
	switch {
	case c.Owner == "":
		return errors.New("provider: Config.Owner is required")
	case c.Kubeconfig == "":
		return errors.New("provider: Config.Kubeconfig is required")
	case c.Log == nil || c.Metrics == nil || c.Outbox == nil || c.Infra == nil || c.Clusters == nil:
		return errors.New("provider: Config.Log, Metrics, Outbox, Infra and Clusters are required")
	}
	if c.Resync <= 0 {
		c.Resync = DefaultResync
	}
	return nil
}

// Provider is the local platform's Cluster API infrastructure provider: a controller-runtime
// manager on the management cluster with the LocalMachine controller, and the LocalCluster
// writer (a NATS controller beside infrad's endpoint one, LocalClusterController). Its cloud
// exists only with a local cloud URL.
type Provider struct {
	owner    string
	log      *slog.Logger
	rest     *rest.Config
	mgr      manager.Manager
	client   client.Client // cached reads (Machines, LocalMachines), direct writes
	reader   client.Reader // uncached reads (Secrets, lists the HTTP API answers)
	cloud    Cloud         // nil: no local cloud configured
	docker   Cloud         // nil: no docker cloud configured
	cloudURL string
	resync   time.Duration
	metrics  *Metrics
	outbox   *outbox.Outbox
	infra    *store.Store[api.Infra]
	clusters *store.Store[api.Cluster]

	started atomic.Bool // CRDs installed and caches synced
	phases  *phaseGauge
}

// New builds the provider (nothing connects yet; Start does).
func New(c Config) (*Provider, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig: %w", err)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	skip := true
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Logger:                 logr.FromSlogHandler(c.Log.With("component", "machines").Handler()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         c.LeaderElection,
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
	p := &Provider{
		owner: c.Owner, log: c.Log, rest: cfg, mgr: mgr,
		client: mgr.GetClient(), reader: mgr.GetAPIReader(),
		cloudURL: c.LocalCloudURL, resync: c.Resync, metrics: c.Metrics, phases: newPhaseGauge(c.Metrics.machines),
		outbox: c.Outbox, infra: c.Infra, clusters: c.Clusters, docker: c.Docker,
	}
	if c.LocalCloudURL != "" {
		var opts []localcloud.ClientOption
		if c.LocalCloudTokenFile != "" {
			opts = append(opts, localcloud.WithTokenFile(c.LocalCloudTokenFile))
		}
		lc, err := localcloud.NewClient(c.LocalCloudURL, opts...)
		if err != nil {
			return nil, fmt.Errorf("local cloud %q: %w", c.LocalCloudURL, err)
		}
		p.cloud = lc
	} else {
		c.Log.Warn("no local cloud configured (--localcloud-url, HOSTPLANE_LOCALCLOUD_URL): LocalMachines are not provisioned")
	}
	if err := p.setupMachineController(); err != nil {
		return nil, err
	}
	return p, nil
}

// CloudFor is the cloud machines of platform live in: the docker engine's for docker, the
// local cloud's otherwise; nil when that one is not configured.
func (p *Provider) CloudFor(platform string) Cloud {
	if platform == api.PlatformDocker {
		return p.docker
	}
	return p.cloud
}

// noCloud is the reason and message of a machine of platform whose cloud is not
// configured.
func noCloud(platform string) (reason, msg string) {
	if platform == api.PlatformDocker {
		return infrav1.ReasonNoDockerCloud, "infrad has no Docker cloud: the machine is not provisioned"
	}
	return infrav1.ReasonNoLocalCloud, "infrad has no local cloud (--localcloud-url, HOSTPLANE_LOCALCLOUD_URL): the machine is not provisioned"
}

// clusterPlatform is cluster's platform type (local when its record is gone or says none).
func (p *Provider) clusterPlatform(ctx context.Context, cluster string) (string, error) {
	c, _, err := p.clusters.Get(ctx, cluster)
	if errors.Is(err, store.ErrNotFound) {
		return api.PlatformLocal, nil
	}
	if err != nil {
		return "", err
	}
	return cmp.Or(c.Spec.Platform.Type, api.PlatformLocal), nil
}

// Start installs the CRDs and waits for Cluster API's Machine CRD (nodepoold installs it),
// retrying while the management apiserver is unreachable, then runs the manager until ctx
// ends.
func (p *Provider) Start(ctx context.Context) error {
	if !p.retry(ctx, "install the infrastructure CRDs", func() error { return crd.Install(ctx, p.rest, CRDs, p.owner) }) ||
		!p.retry(ctx, "wait for Cluster API's Machine CRD", func() error { return crdEstablished(ctx, p.rest, machineCRD) }) {
		return nil
	}
	go func() {
		if p.mgr.GetCache().WaitForCacheSync(ctx) {
			p.started.Store(true)
			p.log.Info("machines provider started", "localcloud", p.cloudURL)
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
func (p *Provider) retry(ctx context.Context, what string, step func() error) bool {
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

// Ready reports nil once the provider serves: its CRDs are installed and its caches synced.
func (p *Provider) Ready() error {
	if !p.started.Load() {
		return errors.New("the machines provider has not started (infrastructure CRDs, management cluster caches)")
	}
	return nil
}
