// Package infrad is hostplane's infrad daemon: platform infrastructure (endpoints, load balancers) and machines.
//
// For every live cluster on the local (or none) platform infrad allocates, once, the endpoint
// and every port of the control plane and records them in its bucket "infra" (api.Infra, key =
// cluster name); for a HighlyAvailable cluster it runs a TCP load balancer on the endpoint in
// front of the kube-apiserver replicas. A record never changes its ports: a second reconcile or
// an infrad restart re-reads it (and re-opens the load balancer). When the cluster is deleting
// or gone, infrad waits until componentd removed every controlplane key of the cluster, then
// closes the load balancer, deletes the record and publishes infra.deleted
// (docs/control-plane-flow.md).
//
// The daemon package holds the wiring (this file), the endpoint reconciler (reconcile.go), the
// hibernation hooks (hibernation.go), the inbox (inbox.go) and the HTTP API (http.go). Its
// parts live in packages of their own: ports (port allocation), lb (the TCP load balancer with
// wake on connect) and provider (the Cluster API infrastructure provider).
//
// With a management cluster (daemon.Base.ManagementKubeconfig) infrad is also the local
// platform's Cluster API infrastructure provider (package provider): it installs the
// infrastructure.hostplane.dev CRDs, writes each cluster's LocalCluster once its record is
// ready and provisions every LocalMachine in the local cloud (Config.LocalCloudURL), which
// outlives infrad; GET /v1/clusters/{cluster}/machines and POST .../machines/{machine}/fault
// serve them (docs/nodepool-flow.md). It owns the inbound event machine.terminating (inbox.go):
// the Machine is deleted, so Cluster API drains it and its MachineSet replaces it.
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/infrad runs.
package infrad

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/infrad/dockercloud"
	"github.com/hostplane/hostplane/services/infrad/lb"
	"github.com/hostplane/hostplane/services/infrad/provider"
	"github.com/hostplane/hostplane/services/localcloud"
)

// Name is the daemon's name.
const Name = "infrad"

// Defaults of Config's own fields.
const (
	DefaultHost           = "127.0.0.1"
	DefaultHealthInterval = 500 * time.Millisecond
	DefaultDeletePoll     = 2 * time.Second
	// DefaultActivityInterval: idleAfter is minutes or hours; a record write per cluster
	// at most every 30 s is cheap.
	DefaultActivityInterval = 30 * time.Second
	// DefaultMachineResync is Config.MachineResync's default.
	DefaultMachineResync = provider.DefaultResync
)

// Config is infrad's configuration. Zero fields get defaults in New.
type Config struct {
	daemon.Base
	// Host is the address every endpoint, port and load balancer of the local platform is on
	// (HOSTPLANE_INFRA_HOST, default 127.0.0.1).
	Host string
	// AdvertiseHost, when set, is the host recorded in clusters' endpoints (the endpoint and
	// the balancer's internal one) instead of Host, on whose ports the balancers still
	// listen: a name that resolves to the leading infrad wherever it runs (deploy/k8s: the
	// headless Service infrad-endpoints, which the leader keeps at its pod address; see
	// daemon.Base.LeaderService), so an endpoint survives a takeover
	// (HOSTPLANE_INFRA_ADVERTISE_HOST).
	AdvertiseHost string
	// IgnitionHost, when set, is the host recorded for clusters' Ignition endpoints instead
	// of Host: a name that resolves to the leading ignitiond (deploy/k8s: the headless
	// Service ignitiond-endpoints) (HOSTPLANE_INFRA_IGNITION_HOST).
	IgnitionHost string
	// APIServerService records each cluster's apiservers as its kube-apiserver Service
	// (api.KubeAPIServerHost, port api.KubeAPIServerServicePort; ports.AtService) instead of
	// ports on Host: for componentd's kubernetes runtime, whose apiservers are pods in the
	// management cluster, not processes on Host. The load balancers forward there, and the
	// daemons reach a SingleReplica cluster's apiserver there (pkg/guest)
	// (HOSTPLANE_INFRA_APISERVER_SERVICE=true).
	APIServerService bool
	// HealthInterval is how often a load balancer probes its backends' /readyz (default
	// 500ms; kube-apiserver's --shutdown-delay-duration must be a few of these).
	HealthInterval time.Duration
	// ActivityInterval is how often the load balancers' last client connection is written to
	// the infra records (lastActivity), on Base.Clock (default DefaultActivityInterval).
	ActivityInterval time.Duration
	// DeletePoll is how often a deleting cluster's controlplane keys are checked again,
	// besides the component events that trigger a check at once (default 2s).
	DeletePoll time.Duration
	// LocalCloudURL is the local cloud's API, "unix:///abs.sock" or "http://host:port"
	// (HOSTPLANE_LOCALCLOUD_URL). Without it LocalMachines are not provisioned (their Ready
	// condition says so).
	LocalCloudURL string
	// LocalCloudTokenFile holds the local cloud's bearer token (HOSTPLANE_LOCALCLOUD_TOKEN_FILE,
	// the file the cloud checks), read again when it changes.
	LocalCloudTokenFile string
	// NodeImage is the node image machines of platform docker are containers of
	// (HOSTPLANE_NODE_IMAGE; default dockercloud.DefaultImage, which make node-image builds).
	NodeImage string
	// MachineResync is how often a running machine's status is read from the local cloud
	// again (default 15s).
	MachineResync time.Duration
	// LeaderElection makes the machines provider hold a Lease in the management cluster, for
	// running several infrads (default off).
	LeaderElection bool
}

func (c *Config) defaults() error {
	c.Host = cmp.Or(c.Host, DefaultHost)
	c.HealthInterval = daemon.PositiveOr(c.HealthInterval, DefaultHealthInterval)
	c.DeletePoll = daemon.PositiveOr(c.DeletePoll, DefaultDeletePoll)
	c.ActivityInterval = daemon.PositiveOr(c.ActivityInterval, DefaultActivityInterval)
	c.MachineResync = daemon.PositiveOr(c.MachineResync, DefaultMachineResync)
	return nil
}

// RegisterFlags adds infrad's own flags to fs and returns the Config they fill.
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.StringVar(&cfg.Host, "endpoint-host", daemon.Env("HOSTPLANE_INFRA_HOST", DefaultHost), "address of the control planes' endpoints and load balancers (HOSTPLANE_INFRA_HOST)")
	fs.StringVar(&cfg.AdvertiseHost, "advertise-host", daemon.Env("HOSTPLANE_INFRA_ADVERTISE_HOST", ""),
		"host recorded in clusters' endpoints when it is not --endpoint-host: a name resolving to the leading infrad (HOSTPLANE_INFRA_ADVERTISE_HOST)")
	fs.StringVar(&cfg.IgnitionHost, "ignition-host", daemon.Env("HOSTPLANE_INFRA_IGNITION_HOST", ""),
		"host recorded for clusters' Ignition endpoints when it is not --endpoint-host: a name resolving to the leading ignitiond (HOSTPLANE_INFRA_IGNITION_HOST)")
	fs.BoolVar(&cfg.APIServerService, "apiserver-service", daemon.Env("HOSTPLANE_INFRA_APISERVER_SERVICE", "") == "true",
		"load balancers forward to each cluster's kube-apiserver Service in the management cluster (componentd's kubernetes runtime) (HOSTPLANE_INFRA_APISERVER_SERVICE)")
	fs.DurationVar(&cfg.HealthInterval, "lb-health-interval", DefaultHealthInterval, "how often a load balancer probes its kube-apiserver backends' /readyz")
	fs.StringVar(&cfg.LocalCloudTokenFile, "localcloud-token-file", daemon.Env(localcloud.EnvTokenFile, ""), "file holding the local cloud's bearer token ("+localcloud.EnvTokenFile+")")
	fs.StringVar(&cfg.LocalCloudURL, "localcloud-url", daemon.Env("HOSTPLANE_LOCALCLOUD_URL", ""), "the local cloud's API, unix:///abs.sock or http://host:port (HOSTPLANE_LOCALCLOUD_URL); without it machines are not provisioned")
	fs.StringVar(&cfg.NodeImage, "node-image", daemon.Env("HOSTPLANE_NODE_IMAGE", dockercloud.DefaultImage),
		"Docker image of platform-docker machines (make node-image builds it) (HOSTPLANE_NODE_IMAGE)")
	fs.BoolVar(&cfg.LeaderElection, "machines-leader-election", false, "hold a Lease in the management cluster for the machines provider (several infrads)")
	return &cfg
}

// Daemon is a running infrad.
type Daemon struct {
	*daemon.Daemon
	cfg        Config
	metrics    *metrics
	outbox     *outbox.Outbox
	infra      *store.Store[api.Infra]
	clusters   *store.Store[api.Cluster]
	components *store.Store[api.ControlPlaneComponent]
	provider   *provider.Provider // nil without a management cluster

	// allocMu serialises allocations, so two clusters reconciled at once never pick the same
	// port (the other records are listed under it).
	allocMu sync.Mutex

	mu      sync.Mutex
	lbs     map[string]*lb.LoadBalancer // cluster → its running load balancer
	ready   map[string]bool             // clusters with a ready record (the clusters gauge)
	stopped bool
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	d := &Daemon{cfg: cfg, lbs: map[string]*lb.LoadBalancer{}, ready: map[string]bool{}}
	return daemon.Embed(d, &d.Daemon, cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketInfra},
		Setup:   d.setup,
		Routes:  d.routes,
		Ready:   d.readyCheck,
		Stop:    d.stop,
	})
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	m, err := newMetrics(rt.Registry)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	d.outbox = rt.Outbox
	st, err := daemon.OpenStores(ctx, rt)
	if err != nil {
		return nil, err
	}
	d.infra, d.clusters, d.components = st.Infra, st.Clusters, st.Components
	d.mu.Lock()
	d.stopped = false
	d.mu.Unlock()

	c, err := rt.Controller(reconcile.Config{
		Name:           Name,
		FilterSubjects: []string{events.ResourceFilter(events.ResourceCluster), events.ResourceFilter(events.ResourceComponent)},
		ListKeys:       d.listKeys,
	}, reconcile.Func(d.reconcile))
	if err != nil {
		return nil, err
	}
	in, err := d.newInbox(ctx, rt)
	if err != nil {
		return nil, err
	}
	runnables := []daemon.Runnable{c, in, daemon.Every(d.clock(), d.cfg.ActivityInterval, d.recordActivity)}
	d.provider = nil
	if d.cfg.ManagementKubeconfig == "" {
		d.Logger().Info("no management cluster (HOSTPLANE_MANAGEMENT_KUBECONFIG): the machines provider is off")
		return runnables, nil
	}
	p, err := provider.New(provider.Config{
		Owner:               Name,
		Kubeconfig:          d.cfg.ManagementKubeconfig,
		LocalCloudURL:       d.cfg.LocalCloudURL,
		LocalCloudTokenFile: d.cfg.LocalCloudTokenFile,
		Resync:              d.cfg.MachineResync,
		LeaderElection:      d.cfg.LeaderElection,
		Log:                 d.Logger(),
		Metrics:             d.metrics.machines,
		Outbox:              d.outbox,
		Infra:               d.infra,
		Clusters:            d.clusters,
		Docker:              dockercloud.New(dockercloud.Cloud{Image: d.cfg.NodeImage}),
	})
	if err != nil {
		return nil, err
	}
	lc, err := p.LocalClusterController(rt)
	if err != nil {
		return nil, err
	}
	d.provider = p
	return append(runnables, lc, p), nil
}

// readyCheck adds the machines provider's readiness, when there is one.
func (d *Daemon) readyCheck(context.Context) error {
	if p := d.provider; p != nil {
		return p.Ready()
	}
	return nil
}

// listKeys is the resync set: every record (so load balancers come back after a restart and
// orphans are released) and every cluster (so one whose event was lost is allocated).
func (d *Daemon) listKeys(ctx context.Context) ([]string, error) {
	return reconcile.ClusterKeys(d.infra, d.clusters)(ctx)
}

// stop closes every load balancer; the records stay, so the next infrad re-opens them.
func (d *Daemon) stop(ctx context.Context) error {
	d.mu.Lock()
	d.stopped = true
	lbs := d.lbs
	d.lbs = map[string]*lb.LoadBalancer{}
	d.mu.Unlock()
	var errs []error
	for cluster, b := range lbs {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close load balancer of %s: %w", cluster, err))
		}
	}
	return errors.Join(errs...)
}
