// Package clusterd is hostplane's clusterd daemon: HostedCluster lifecycle and the public cluster API.
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/clusterd runs.
//
// clusterd owns the "clusters" KV bucket. Its HTTP API (http.go) validates and stores what
// users ask for and publishes cluster.created / updated / deleting. Its reconciler
// (reconcile.go) aggregates what infrad, pkid and componentd report into the cluster's status
// (status.go) and finishes a deletion once every other daemon has released the cluster.
//
// With a management cluster (daemon.Base.ManagementKubeconfig) it also writes each cluster's
// Cluster API side there (management.go), with server-side apply as field manager clusterd:
// the namespace hostplane-<cluster>, the Secret <cluster>-kubeconfig (type
// cluster.x-k8s.io/secret, key "value": the admin kubeconfig, refreshed with the PKI
// serial), the HostedControlPlane <cluster> (controlplane.hostplane.dev/v1alpha1, CRD in
// crds/, installed at start) and the Cluster <cluster> (cluster.x-k8s.io/v1beta2) whose
// controlPlaneRef is that HostedControlPlane and, on the local platform, whose
// infrastructureRef is infrad's LocalCluster <cluster>. A deleting cluster first waits for
// nodepoold and ignitiond to remove every "nodepools" and "ignition" key of the cluster,
// then deletes the Cluster (and waits until Cluster API let it go), the HostedControlPlane
// and the Secret, then waits for infrad, pkid and componentd as before, and deletes the
// namespace last.
package clusterd

import (
	"github.com/robfig/cron/v3"
	"math"
	"strconv"

	"cmp"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/clusterd/crds"
)

// Name is the daemon's name.
const Name = "clusterd"

// Defaults of Config.
const (
	DefaultRequeue         = 30 * time.Second
	DefaultDeletingRequeue = 5 * time.Second
)

// Config is clusterd's configuration.
type Config struct {
	daemon.Base
	// SealKeyFile holds the AES key pkid seals kubeconfigs with (HOSTPLANE_PKI_KEY_FILE);
	// default <DataDir>/pki.key.
	SealKeyFile string
	// Requeue is how often a live cluster is reconciled without an event (default 30s);
	// DeletingRequeue the same for a cluster being deleted (default 5s).
	Requeue, DeletingRequeue time.Duration
	// HibernationTick is how often the hibernation schedules and idleness of every cluster
	// are looked at, on Base.Clock (default DefaultHibernationTick).
	HibernationTick time.Duration
	// EventStreamsPerCaller bounds the event streams (GET .../events) one caller (token, or
	// address without access control) holds open at once, per replica (default
	// DefaultEventStreamsPerCaller); one more is answered 429.
	EventStreamsPerCaller int
	// MinBackupInterval is the shortest interval a cluster's etcd backup schedule may fire at
	// (HOSTPLANE_MIN_BACKUP_INTERVAL, --min-backup-interval; default DefaultMinBackupInterval):
	// each firing snapshots etcd and uploads it.
	MinBackupInterval time.Duration
	// MaxClusters bounds the clusters the installation holds (HOSTPLANE_MAX_CLUSTERS,
	// --max-clusters; default DefaultMaxClusters): one more is a 409 until one is deleted.
	MaxClusters int
}

// Defaults of Config.
const (
	DefaultMinBackupInterval = 5 * time.Minute
	DefaultMaxClusters       = 500
)

// Validate fills defaults and checks the fields.
func (c *Config) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	c.SealKeyFile = cmp.Or(c.SealKeyFile, filepath.Join(c.DataDir, "pki.key"))
	c.Requeue = daemon.PositiveOr(c.Requeue, DefaultRequeue)
	c.DeletingRequeue = daemon.PositiveOr(c.DeletingRequeue, DefaultDeletingRequeue)
	c.HibernationTick = daemon.PositiveOr(c.HibernationTick, DefaultHibernationTick)
	c.MinBackupInterval = daemon.PositiveOr(c.MinBackupInterval, DefaultMinBackupInterval)
	if c.MaxClusters <= 0 {
		c.MaxClusters = DefaultMaxClusters
	}
	if c.EventStreamsPerCaller <= 0 {
		c.EventStreamsPerCaller = DefaultEventStreamsPerCaller
	}
	return nil
}

// RegisterFlags adds clusterd's own flags to fs and returns the Config they fill.
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.StringVar(&cfg.SealKeyFile, "pki-key-file", daemon.Env("HOSTPLANE_PKI_KEY_FILE", ""),
		"file with the key pkid seals kubeconfigs with (HOSTPLANE_PKI_KEY_FILE; default <data-dir>/pki.key)")
	fs.DurationVar(&cfg.MinBackupInterval, "min-backup-interval", daemon.EnvAs("HOSTPLANE_MIN_BACKUP_INTERVAL", DefaultMinBackupInterval, time.ParseDuration),
		"the shortest interval a cluster's etcd backup schedule may fire at (HOSTPLANE_MIN_BACKUP_INTERVAL)")
	fs.IntVar(&cfg.MaxClusters, "max-clusters", daemon.EnvAs("HOSTPLANE_MAX_CLUSTERS", DefaultMaxClusters, strconv.Atoi),
		"the most clusters this installation holds; one more is refused until one is deleted (HOSTPLANE_MAX_CLUSTERS)")
	return &cfg
}

// Daemon is a running clusterd.
type Daemon struct {
	*daemon.Daemon
	cfg      Config
	metrics  *metrics
	releases api.ReleaseCatalogue // what validation checks against (catalogue)

	// Set in setup, before the runtime is published; handlers reach them only after
	// daemon.Started let the request through.
	clusters   *store.Store[api.Cluster]
	infra      *store.Store[api.Infra]
	pki        *store.Store[api.ClusterPKI]
	components *store.Store[api.ControlPlaneComponent]
	nodepools  *store.Store[api.NodePool]
	ignition   *store.Store[api.IgnitionServer] // key <cluster>; <cluster>.<np> are token records
	backups    *store.Store[api.Backup]         // componentd's; read for spec.restoreFrom
	outbox     *outbox.Outbox
	controller *reconcile.Controller

	// mgmt writes the Cluster API objects; nil without a management cluster.
	mgmt *management

	sealMu sync.Mutex
	seal   *certs.SealKey
	guests *guest.Clients

	mgmtErrMu sync.Mutex
	mgmtErr   map[string]string // cluster → the management error last logged

	streamsMu sync.Mutex
	streams   map[string]int // caller → event streams open
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, metrics: newMetrics(), releases: catalogue(cfg.MinBackupInterval), mgmtErr: map[string]string{}, streams: map[string]int{}}
	return daemon.Embed(d, &d.Daemon, cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketClusters},
		Setup:   d.setup,
		Routes:  d.routes,
	})
}

// catalogue is what validation checks against: the releases, and schedules parsed as
// componentd runs them, a backup schedule firing at most every minBackup.
func catalogue(minBackup time.Duration) api.ReleaseCatalogue {
	return api.ReleaseCatalogue{
		Known:        func(v string) error { _, err := release.Lookup(v); return err },
		CheckUpgrade: release.CheckUpgrade,
		ParseSchedule: func(s string) error {
			_, err := cron.ParseStandard(s) // the parser componentd runs the schedule with
			return err
		},
		ParseBackupSchedule: func(s string) error {
			sch, err := cron.ParseStandard(s)
			if err != nil {
				return err
			}
			if every := shortestInterval(sch); every < minBackup {
				return fmt.Errorf("it fires every %v; backups may be taken at most every %v (clusterd --min-backup-interval)", every, minBackup)
			}
			return nil
		},
	}
}

// shortestInterval is the shortest time between two firings of sch over its next 500 (from
// a fixed Monday, so every answer is the same): a minute field of "*" answers 1m.
func shortestInterval(sch cron.Schedule) time.Duration {
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	shortest := time.Duration(math.MaxInt64)
	for range 500 {
		next := sch.Next(t)
		if next.IsZero() {
			break
		}
		shortest = min(shortest, next.Sub(t))
		t = next
	}
	return shortest
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	if err := d.metrics.register(rt.Registry); err != nil {
		return nil, err
	}
	st, err := daemon.OpenStores(ctx, rt)
	if err != nil {
		return nil, err
	}
	d.clusters, d.infra, d.pki, d.components = st.Clusters, st.Infra, st.PKI, st.Components
	if d.nodepools, err = daemon.Open[api.NodePool](ctx, rt, bus.BucketNodePools); err != nil {
		return nil, err
	}
	if d.ignition, err = daemon.Open[api.IgnitionServer](ctx, rt, bus.BucketIgnition); err != nil {
		return nil, err
	}
	if d.backups, err = daemon.Open[api.Backup](ctx, rt, bus.BucketBackups); err != nil {
		return nil, err
	}
	d.outbox = rt.Outbox
	if d.cfg.ManagementKubeconfig != "" {
		m, cfg, err := newManagement(d.cfg.ManagementKubeconfig)
		if err != nil {
			return nil, err
		}
		if err := crd.Install(ctx, cfg, crds.FS, Name); err != nil {
			return nil, fmt.Errorf("install the HostedControlPlane CRD: %w", err)
		}
		d.mgmt = m
	} else {
		rt.Log.Warn("no management cluster (HOSTPLANE_MANAGEMENT_KUBECONFIG): clusterd writes no Cluster API objects, so node pools cannot join")
	}

	c, err := rt.Controller(reconcile.Config{
		Name: Name,
		FilterSubjects: []string{
			events.ResourceFilter(events.ResourceCluster),
			events.ResourceFilter(events.ResourceInfra),
			events.ResourceFilter(events.ResourcePKI),
			events.ResourceFilter(events.ResourceComponent),
			events.ResourceFilter(events.ResourceNodePool),
			events.ResourceFilter(events.ResourceIgnition),
		},
		ListKeys: func(ctx context.Context) ([]string, error) { return d.clusters.Keys(ctx) },
	}, reconcile.Func(d.Reconcile))
	if err != nil {
		return nil, err
	}
	d.controller = c
	in, err := d.newInbox(ctx, rt)
	if err != nil {
		return nil, err
	}
	// No push consumer reads the events stream: one would deliver wherever its creator said.
	audit := &natsauth.ConsumerAuditor{NC: rt.Conn, JS: rt.JS, Log: d.Logger(), Deleted: d.metrics.pushConsumers}
	return []daemon.Runnable{c, in, audit, daemon.Every(d.cfg.Clock, d.cfg.HibernationTick, d.hibernationTicker)}, nil
}

// sealKey loads the seal key on first use: pkid may create the file after clusterd started.
func (d *Daemon) sealKey() (*certs.SealKey, error) {
	d.sealMu.Lock()
	defer d.sealMu.Unlock()
	if d.seal != nil {
		return d.seal, nil
	}
	k, err := certs.LoadOrCreateSealKey(d.cfg.SealKeyFile)
	if err != nil {
		return nil, err
	}
	d.seal = k
	return k, nil
}

// guestClients returns the cached admin clients of the guest clusters (pkg/guest).
func (d *Daemon) guestClients() (*guest.Clients, error) {
	key, err := d.sealKey()
	if err != nil {
		return nil, err
	}
	d.sealMu.Lock()
	defer d.sealMu.Unlock()
	if d.guests == nil {
		d.guests = guest.NewClients(d.pki, key, guest.WithInfra(d.infra))
	}
	return d.guests, nil
}
