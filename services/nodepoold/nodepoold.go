// Package nodepoold is hostplane's nodepoold daemon: NodePools, Cluster API objects, rollouts, autorepair and scaling.
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/nodepoold runs.
//
// nodepoold owns the "nodepools" KV bucket (api.NodePool, key "<cluster>.<nodepool>"). Its
// HTTP API (http.go) validates and stores what users ask for, with the pool's config hash
// (hash.go) in its status so ignitiond can mint a token at once. Its reconciler (reconcile.go)
// writes each pool's management objects (objects.go: userdata Secret, LocalMachineTemplate,
// MachineDeployment or MachineSet, MachineHealthCheck) once ignitiond's userdata for the hash
// is ready, updates InPlace pools machine by machine (inplace.go), keeps the guest Nodes'
// labels and taints (nodes.go), reports status (status.go) and deletes pools (delete.go).
// Cluster API's core controllers run in-process (management.go) unless told they run
// elsewhere. docs/nodepool-flow.md is the contract with the other daemons.
package nodepoold

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
)

// Name is the daemon's name.
const Name = "nodepoold"

// Cluster API modes (Config.ClusterAPI, --cluster-api, HOSTPLANE_CLUSTER_API).
const (
	// ClusterAPIInProcess runs Cluster API's core controllers inside nodepoold and installs
	// their CRDs at start.
	ClusterAPIInProcess = "in-process"
	// ClusterAPIExternal expects Cluster API (CRDs and controllers) installed in the
	// management cluster already.
	ClusterAPIExternal = "external"
)

// Defaults of Config.
const (
	DefaultRequeue         = 30 * time.Second
	DefaultProgressRequeue = 3 * time.Second
	DefaultJoinGrace       = 3 * time.Minute
)

// Config is nodepoold's configuration.
type Config struct {
	daemon.Base
	// SealKeyFile holds the AES key pkid seals kubeconfigs with (HOSTPLANE_PKI_KEY_FILE);
	// default <DataDir>/pki.key. nodepoold opens the guest clusters' admin kubeconfigs with
	// it to label, taint, cordon and drain the pools' Nodes.
	SealKeyFile string
	// ClusterAPI is ClusterAPIInProcess (default) or ClusterAPIExternal.
	ClusterAPI string
	// Requeue is how often a settled pool is reconciled without an event (default 30s);
	// ProgressRequeue the same for a pool that is rolling, scaling, updating in place, waiting
	// for its userdata or being deleted (default 3s).
	Requeue, ProgressRequeue time.Duration
	// JoinGrace is how long a machine may go without a Node before ReachedIgnitionEndpoint
	// names it (default 3m).
	JoinGrace time.Duration
	// CheckConfig validates one config document (an Ignition v3 config or a MachineConfig);
	// default checkConfigDocument (pkg/ignition's parser).
	CheckConfig func(api.ConfigDocument) error
	// MachineQuotaPerCluster bounds the machines one cluster's pools may ask for together
	// (the sum of their sizes, an autoscaled pool counting its maximum; default
	// DefaultMachineQuotaPerCluster, HOSTPLANE_MACHINE_QUOTA_PER_CLUSTER); MachineQuotaTotal
	// the same over every cluster (default DefaultMachineQuotaTotal,
	// HOSTPLANE_MACHINE_QUOTA_TOTAL). A create or resize past either is refused (409).
	MachineQuotaPerCluster, MachineQuotaTotal int
}

// Default machine quotas.
const (
	DefaultMachineQuotaPerCluster = 2000
	DefaultMachineQuotaTotal      = 20000
)

// Validate fills defaults and checks the fields.
func (c *Config) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	c.SealKeyFile = cmp.Or(c.SealKeyFile, filepath.Join(c.DataDir, "pki.key"))
	switch c.ClusterAPI {
	case "":
		c.ClusterAPI = ClusterAPIInProcess
	case ClusterAPIInProcess, ClusterAPIExternal:
	default:
		return fmt.Errorf("%w: %q (want %s or %s)", ErrClusterAPIMode, c.ClusterAPI, ClusterAPIInProcess, ClusterAPIExternal)
	}
	c.Requeue = daemon.PositiveOr(c.Requeue, DefaultRequeue)
	c.ProgressRequeue = daemon.PositiveOr(c.ProgressRequeue, DefaultProgressRequeue)
	c.JoinGrace = daemon.PositiveOr(c.JoinGrace, DefaultJoinGrace)
	if c.CheckConfig == nil {
		c.CheckConfig = checkConfigDocument
	}
	if c.MachineQuotaPerCluster <= 0 {
		c.MachineQuotaPerCluster = DefaultMachineQuotaPerCluster
	}
	if c.MachineQuotaTotal <= 0 {
		c.MachineQuotaTotal = DefaultMachineQuotaTotal
	}
	return nil
}

// RegisterFlags adds nodepoold's own flags to fs and returns the Config they fill.
// (controller-runtime registers --kubeconfig on the global flag set; nodepoold never
// registers one: the management cluster is --management-kubeconfig.)
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.StringVar(&cfg.SealKeyFile, "pki-key-file", daemon.Env("HOSTPLANE_PKI_KEY_FILE", ""),
		"file with the key pkid seals kubeconfigs with (HOSTPLANE_PKI_KEY_FILE; default <data-dir>/pki.key)")
	fs.StringVar(&cfg.ClusterAPI, "cluster-api", daemon.Env("HOSTPLANE_CLUSTER_API", ClusterAPIInProcess),
		"where Cluster API's controllers run: in-process (installs its CRDs) or external (HOSTPLANE_CLUSTER_API)")
	fs.IntVar(&cfg.MachineQuotaPerCluster, "machine-quota-per-cluster", daemon.EnvAs("HOSTPLANE_MACHINE_QUOTA_PER_CLUSTER", DefaultMachineQuotaPerCluster, strconv.Atoi),
		"the most machines one cluster's node pools may ask for together (HOSTPLANE_MACHINE_QUOTA_PER_CLUSTER)")
	fs.IntVar(&cfg.MachineQuotaTotal, "machine-quota-total", daemon.EnvAs("HOSTPLANE_MACHINE_QUOTA_TOTAL", DefaultMachineQuotaTotal, strconv.Atoi),
		"the most machines every cluster's node pools may ask for together (HOSTPLANE_MACHINE_QUOTA_TOTAL)")
	return &cfg
}

// Daemon is a running nodepoold.
type Daemon struct {
	*daemon.Daemon
	cfg     Config
	metrics *metrics
	checks  api.NodePoolChecks

	// Set in setup, before the runtime is published; handlers reach them only after
	// daemon.Started let the request through.
	pools      *store.Store[api.NodePool]
	clusters   *store.Store[api.Cluster]
	ignition   *store.Store[api.IgnitionTokens]
	pki        *store.Store[api.ClusterPKI]
	infra      *store.Store[api.Infra] // for the guest clients (pkg/guest WithInfra)
	outbox     *outbox.Outbox
	controller *reconcile.Controller
	mgmt       *management // nil without a management cluster
	applied    appliedObjects

	guestMu sync.Mutex
	guests  *guest.Clients
	// nodeWatches holds the guest clusters' Node informers (nil without a management
	// cluster: no pool has machines then).
	nodeWatches *nodeWatches
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, metrics: newMetrics()}
	d.checks = api.NodePoolChecks{Releases: releases, Config: cfg.CheckConfig}
	return daemon.Embed(d, &d.Daemon, cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketNodePools},
		Setup:   d.setup,
		Routes:  d.routes,
		Ready:   d.ready,
	})
}

// releases is the catalogue validation checks against.
var releases = api.ReleaseCatalogue{
	Known:        func(v string) error { _, err := release.Lookup(v); return err },
	CheckUpgrade: release.CheckUpgrade,
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	if err := d.metrics.register(rt.Registry); err != nil {
		return nil, err
	}
	var err error
	if d.pools, err = daemon.Open[api.NodePool](ctx, rt, bus.BucketNodePools); err != nil {
		return nil, err
	}
	if d.clusters, err = daemon.Open[api.Cluster](ctx, rt, bus.BucketClusters); err != nil {
		return nil, err
	}
	if d.ignition, err = daemon.Open[api.IgnitionTokens](ctx, rt, bus.BucketIgnition); err != nil {
		return nil, err
	}
	if d.infra, err = daemon.Open[api.Infra](ctx, rt, bus.BucketInfra); err != nil {
		return nil, err
	}
	if d.pki, err = daemon.Open[api.ClusterPKI](ctx, rt, bus.BucketPKI); err != nil {
		return nil, err
	}
	d.outbox = rt.Outbox

	c, err := rt.Controller(reconcile.Config{
		Name: Name,
		FilterSubjects: []string{
			events.ResourceFilter(events.ResourceCluster),
			events.ResourceFilter(events.ResourceNodePool),
			events.ResourceFilter(events.ResourceIgnition),
			events.ResourceFilter(events.ResourceMachine),
			events.ResourceFilter(events.ResourceComponent),
		},
		Keys:     eventKeys,
		ListKeys: d.listKeys,
	}, reconcile.Func(d.Reconcile))
	if err != nil {
		return nil, err
	}
	d.controller = c
	runnables := []daemon.Runnable{c}

	if d.cfg.ManagementKubeconfig != "" {
		m, err := newManagement(d.cfg.ManagementKubeconfig, d.cfg.ClusterAPI == ClusterAPIInProcess, d.Logger(), c.Enqueue, d.metrics.managementRebuilds)
		if err != nil {
			return nil, err
		}
		d.mgmt = m
		d.nodeWatches = newNodeWatches(d.Logger(), c.Enqueue, d.metrics.nodeInformers)
		runnables = append(runnables, m, d.nodeWatches)
	} else {
		d.Logger().Warn("no management cluster (--management-kubeconfig, HOSTPLANE_MANAGEMENT_KUBECONFIG): node pools are stored but get no machines")
	}

	in, err := d.newInbox(ctx, rt)
	if err != nil {
		return nil, err
	}
	return append(runnables, in), nil
}

// ready adds the management cluster to readiness: Cluster API's CRDs installed and the caches
// synced.
func (d *Daemon) ready(context.Context) error {
	if d.mgmt == nil {
		return nil
	}
	return d.mgmt.ready()
}

// listKeys is what the resync looks at: every pool, and every cluster (whose autonode pool
// follows its spec.autoNode).
func (d *Daemon) listKeys(ctx context.Context) ([]string, error) {
	pools, err := d.pools.Keys(ctx)
	if err != nil {
		return nil, err
	}
	clusters, err := d.clusters.Keys(ctx)
	if err != nil {
		return nil, err
	}
	return append(pools, clusters...), nil
}

// eventKeys maps an event to the keys it concerns: a pool's own events and ignitiond's token
// events (subject "<cluster>/<nodepool>") name one pool; everything else (cluster, machine,
// component events, ignition.server) names the cluster, whose reconcile enqueues every pool of
// it.
func eventKeys(subject string, ev events.Event) ([]string, error) {
	s, err := events.ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	if s.Resource == events.ResourceNodePool || s.Resource == events.ResourceIgnition {
		if cluster, pool, ok := cutEventKey(ev.Subject); ok && cluster == s.Cluster {
			return []string{api.NodePoolKey(cluster, pool)}, nil
		}
	}
	return []string{s.Cluster}, nil
}

// guestClients returns the guest cluster clients, loading the seal key on first use: pkid may
// create the file after nodepoold started.
func (d *Daemon) guestClients() (*guest.Clients, error) {
	d.guestMu.Lock()
	defer d.guestMu.Unlock()
	if d.guests != nil {
		return d.guests, nil
	}
	k, err := certs.LoadOrCreateSealKey(d.cfg.SealKeyFile)
	if err != nil {
		return nil, fmt.Errorf("seal key %s: %w", d.cfg.SealKeyFile, err)
	}
	d.guests = guest.NewClients(d.pki, k, guest.WithInfra(d.infra))
	return d.guests, nil
}
