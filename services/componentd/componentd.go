package componentd

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/snapstore"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
	"github.com/hostplane/hostplane/services/componentd/procruntime"
)

// Name is the daemon's name.
const Name = "componentd"

// Runtimes: Config.Runtime values.
const (
	// RuntimeProcess runs the components as child processes of componentd (the default).
	RuntimeProcess = "process"
	// RuntimeKubernetes runs them as workloads in the management cluster (package kuberuntime).
	RuntimeKubernetes = "kubernetes"
)

// Config is componentd's configuration.
type Config struct {
	daemon.Base
	// SealKeyFile opens the keys and kubeconfigs pkid sealed (HOSTPLANE_PKI_KEY_FILE);
	// default <DataDir>/pki.key, created on first use.
	SealKeyFile string
	// Runtime runs the components: RuntimeProcess (default) or RuntimeKubernetes.
	Runtime string
	// ProgressInterval is how soon a cluster whose components are still rolling out is
	// looked at again (default 750ms); SteadyInterval is how often a converged cluster is
	// (default 10s), so a crashed process shows in its status.
	ProgressInterval, SteadyInterval time.Duration
	// KarpenterBinary is the hostplane-karpenter executable the autoscaler component runs
	// (HOSTPLANE_KARPENTER_BINARY); default: hostplane-karpenter beside this program's own
	// executable, else on PATH.
	KarpenterBinary string
	// DNSImage is the CoreDNS image clusters of real nodes run as their DNS (package
	// addons; HOSTPLANE_DNS_IMAGE; default DefaultDNSImage).
	DNSImage string
	// NetImage is the image of hostplane-netd, the pod network of clusters of real nodes
	// (package addons; HOSTPLANE_NETD_IMAGE; no default: hostplane dev pushes one to its
	// registry and sets it). Without it those clusters get no addons, and say so.
	NetImage string
	// KarpenterImage is the image the kubernetes runtime runs the autoscaler from: one with
	// /usr/local/bin/hostplane-karpenter, as componentd's own image (HOSTPLANE_KARPENTER_IMAGE;
	// default DefaultKarpenterImage).
	KarpenterImage string
	// Tuning selects which of the release catalogue's component settings the control planes
	// run with (HOSTPLANE_COMPONENT_TUNING; release.ParseSelection's syntax: "" or "all" for
	// every setting, the default, "none", "a,b" or "-a,-b"). Changing it rolls the
	// components whose settings change. Meant for measuring a setting and for turning off
	// one that misbehaves.
	Tuning string
	// BackupStoreURL, if set, is an S3-compatible store the etcd snapshots go to instead of
	// the JetStream object store etcd-snapshots: https://<host>/<bucket>[/<prefix>]
	// (HOSTPLANE_BACKUP_STORE_URL; credentials from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY or the other places the AWS tools look). BackupStoreCAFile
	// verifies its certificate (HOSTPLANE_BACKUP_STORE_CA_FILE) and BackupStoreRegion names
	// the bucket's region (HOSTPLANE_BACKUP_STORE_REGION; else the store is asked).
	BackupStoreURL, BackupStoreCAFile, BackupStoreRegion string
	// MaxBackupsPerCluster bounds a cluster's on-demand backups (POST .../backups; default
	// DefaultMaxBackupsPerCluster; HOSTPLANE_MAX_BACKUPS_PER_CLUSTER, --max-backups-per-cluster):
	// one more is a 409 until one is deleted. Scheduled ones are bounded by their retention.
	MaxBackupsPerCluster int

	tuning release.Selection // Tuning, parsed
}

// DefaultMaxBackupsPerCluster is Config.MaxBackupsPerCluster's default.
const DefaultMaxBackupsPerCluster = 100

// DefaultKarpenterImage is Config.KarpenterImage's default: the componentd image
// deploy/images/build.sh builds, which carries hostplane-karpenter.
const DefaultKarpenterImage = "hostplane/componentd:dev"

func (c *Config) defaults() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	c.SealKeyFile = cmp.Or(c.SealKeyFile, filepath.Join(c.DataDir, "pki.key"))
	c.Runtime = cmp.Or(c.Runtime, RuntimeProcess)
	c.DNSImage = cmp.Or(c.DNSImage, DefaultDNSImage)
	switch c.Runtime {
	case RuntimeProcess:
	case RuntimeKubernetes:
		if c.ManagementKubeconfig == "" {
			return fmt.Errorf("%w: set --management-kubeconfig (HOSTPLANE_MANAGEMENT_KUBECONFIG)", ErrNoManagementKubeconfig)
		}
	default:
		return fmt.Errorf("%w %q (want %q or %q)", ErrUnsupportedRuntime, c.Runtime, RuntimeProcess, RuntimeKubernetes)
	}
	if c.KarpenterBinary == "" {
		c.KarpenterBinary = findKarpenter()
	}
	c.KarpenterImage = cmp.Or(c.KarpenterImage, DefaultKarpenterImage)
	if c.tuning, err = release.ParseSelection(c.Tuning); err != nil {
		return err
	}
	c.ProgressInterval = daemon.PositiveOr(c.ProgressInterval, 750*time.Millisecond)
	c.SteadyInterval = daemon.PositiveOr(c.SteadyInterval, 10*time.Second)
	if c.MaxBackupsPerCluster <= 0 {
		c.MaxBackupsPerCluster = DefaultMaxBackupsPerCluster
	}
	return nil
}

// RegisterFlags adds componentd's own flags to fs and returns the Config they fill.
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.StringVar(&cfg.SealKeyFile, "pki-key-file", daemon.Env("HOSTPLANE_PKI_KEY_FILE", ""),
		"key that opens the sealed PKI (HOSTPLANE_PKI_KEY_FILE; default <data dir>/pki.key)")
	fs.IntVar(&cfg.MaxBackupsPerCluster, "max-backups-per-cluster", daemon.EnvAs("HOSTPLANE_MAX_BACKUPS_PER_CLUSTER", DefaultMaxBackupsPerCluster, strconv.Atoi),
		"the most on-demand backups a cluster holds; one more is refused until one is deleted (HOSTPLANE_MAX_BACKUPS_PER_CLUSTER)")
	fs.StringVar(&cfg.KarpenterBinary, "karpenter-binary", daemon.Env("HOSTPLANE_KARPENTER_BINARY", ""),
		"hostplane-karpenter executable for the autoscaler (HOSTPLANE_KARPENTER_BINARY; default: beside this executable, else on PATH)")
	fs.StringVar(&cfg.DNSImage, "dns-image", daemon.Env("HOSTPLANE_DNS_IMAGE", DefaultDNSImage),
		"CoreDNS image clusters of real nodes (platform none) run as their DNS (HOSTPLANE_DNS_IMAGE)")
	fs.StringVar(&cfg.NetImage, "netd-image", daemon.Env("HOSTPLANE_NETD_IMAGE", ""),
		"hostplane-netd image, the pod network of clusters of real nodes (platform none) (HOSTPLANE_NETD_IMAGE)")
	fs.StringVar(&cfg.KarpenterImage, "karpenter-image", daemon.Env("HOSTPLANE_KARPENTER_IMAGE", DefaultKarpenterImage),
		"image with /usr/local/bin/hostplane-karpenter the kubernetes runtime runs the autoscaler from (HOSTPLANE_KARPENTER_IMAGE)")
	fs.StringVar(&cfg.Tuning, "component-tuning", daemon.Env("HOSTPLANE_COMPONENT_TUNING", ""),
		"which component settings of the release catalogue apply: all (default), none, a,b or -a,-b (HOSTPLANE_COMPONENT_TUNING)")
	fs.StringVar(&cfg.BackupStoreURL, "backup-store-url", daemon.Env("HOSTPLANE_BACKUP_STORE_URL", ""),
		"an S3-compatible store for the etcd snapshots, https://<host>/<bucket>[/<prefix>], credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (HOSTPLANE_BACKUP_STORE_URL; default: the JetStream object store "+bus.ObjectStoreSnapshots+")")
	fs.StringVar(&cfg.BackupStoreCAFile, "backup-store-ca-file", daemon.Env("HOSTPLANE_BACKUP_STORE_CA_FILE", ""),
		"CA bundle that verifies the backup store's certificate (HOSTPLANE_BACKUP_STORE_CA_FILE; default: the system's)")
	fs.StringVar(&cfg.BackupStoreRegion, "backup-store-region", daemon.Env("HOSTPLANE_BACKUP_STORE_REGION", ""),
		"the backup bucket's region (HOSTPLANE_BACKUP_STORE_REGION; default: asked of the store)")
	fs.StringVar(&cfg.Runtime, "runtime", daemon.Env("HOSTPLANE_COMPONENTD_RUNTIME", RuntimeProcess),
		"control-plane runtime: process or kubernetes (HOSTPLANE_COMPONENTD_RUNTIME)")
	return &cfg
}

// Daemon is a running componentd.
type Daemon struct {
	*daemon.Daemon
	cfg Config

	// Set up by setup, read-only afterwards.
	rt         *daemon.Runtime
	clusters   *store.Store[api.Cluster]
	infra      *store.Store[api.Infra]
	pki        *store.Store[api.ClusterPKI]
	components *store.Store[api.ControlPlaneComponent]
	// nodePools is read at deletion: the control plane stays up until every node pool of
	// the cluster is gone, so machines drain against a live API.
	nodePools *store.Store[api.NodePool]
	// Backups (backups.go): records, in-place restore requests (same bucket) and snapshots.
	backups    *store.Store[api.Backup]
	restores   *store.Store[restoreRequest]
	keys       *store.Store[backupKeys]
	snapshots  snapstore.Store
	controller *reconcile.Controller
	seal       *certs.SealKey
	metrics    *metrics
	// guests are the guest clusters' admin clients the addons are applied with.
	guests     *guest.Clients
	addonState addonState
	workloads  workloads // the runtime: processRuntime or *kubeRuntime
	// proc is the process runtime (package procruntime). It exists whatever the runtime, so
	// StopAll, RunDir and ClusterDir work before Run and after it.
	proc *procruntime.Runtime

	// Reconciles hold halt for reading; StopAll takes it for writing, so no reconcile
	// starts a process once StopAll began.
	halt   sync.RWMutex
	halted atomic.Bool
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	d := &Daemon{cfg: cfg, addonState: addonState{applied: map[string]addonApplied{}}}
	var err error
	if d.Daemon, err = daemon.New(cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketControlPlane, bus.BucketBackups},
		Setup:   d.setup,
		Routes:  d.routes,
		Stop:    d.stop,
	}); err != nil {
		return nil, err
	}
	d.proc = procruntime.New(procruntime.Config{Dir: d.dir(), Log: d.Logger(), Enqueue: d.enqueue,
		Restarted: func(cluster, comp string, n int) {
			d.metrics.restarts.WithLabelValues(cluster, comp).Add(float64(n))
		}})
	return d, nil
}

// dir is componentd's own directory, <data dir>/componentd.
func (d *Daemon) dir() string { return filepath.Join(d.cfg.DataDir, Name) }

// RunDir is the process supervisor's state directory (pidfiles).
func (d *Daemon) RunDir() string { return d.proc.RunDir() }

// ClusterDir is where the process runtime keeps a cluster's certificates, kubeconfigs, etcd
// data and logs.
func (d *Daemon) ClusterDir(cluster string) string { return d.proc.ClusterDir(cluster) }

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	d.rt = rt
	st, err := daemon.OpenStores(ctx, rt)
	if err != nil {
		return nil, err
	}
	d.clusters, d.infra, d.pki, d.components = st.Clusters, st.Infra, st.PKI, st.Components
	if d.nodePools, err = daemon.Open[api.NodePool](ctx, rt, bus.BucketNodePools); err != nil {
		return nil, err
	}
	kv, err := rt.Bucket(ctx, bus.BucketBackups)
	if err != nil {
		return nil, err
	}
	d.backups, d.restores, d.keys = store.New[api.Backup](kv), store.New[restoreRequest](kv), store.New[backupKeys](kv)
	if d.cfg.BackupStoreURL == "" {
		objects, err := rt.ObjectStore(ctx, bus.ObjectStoreSnapshots)
		if err != nil {
			return nil, err
		}
		d.snapshots = snapstore.NATS(objects, bus.ObjectStoreSnapshots)
	} else if d.snapshots, err = snapstore.S3(ctx, snapstore.S3Config{URL: d.cfg.BackupStoreURL, CAFile: d.cfg.BackupStoreCAFile, Region: d.cfg.BackupStoreRegion}); err != nil {
		return nil, err
	}
	if d.seal, err = certs.LoadOrCreateSealKey(d.cfg.SealKeyFile); err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	if d.metrics, err = newMetrics(rt.Registry); err != nil {
		return nil, err
	}
	d.guests = d.newGuests()
	switch d.cfg.Runtime {
	case RuntimeKubernetes:
		kc, err := os.ReadFile(d.cfg.ManagementKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("management kubeconfig: %w", err)
		}
		rc, err := kube.RESTConfig(kc)
		if err != nil {
			return nil, fmt.Errorf("management kubeconfig %s: %w", d.cfg.ManagementKubeconfig, err)
		}
		kr, err := kuberuntime.New(rc)
		if err != nil {
			return nil, err
		}
		d.workloads = newKubeRuntime(d, kr)
	default:
		if err := d.proc.Open(); err != nil {
			return nil, err
		}
		d.workloads = processRuntime{d}
	}

	c, err := rt.Controller(reconcile.Config{
		Name: Name,
		FilterSubjects: []string{
			events.ResourceFilter(events.ResourceCluster),
			events.ResourceFilter(events.ResourcePKI),
			events.ResourceFilter(events.ResourceInfra),
			// A pool that starts or stops autoscaling starts or stops the autoscaler.
			events.ResourceFilter(events.ResourceNodePool),
			// Backups asked for through another replica's API.
			events.ResourceFilter(events.ResourceBackup),
		},
		ListKeys: d.listClusters,
	}, reconcile.Func(d.reconcile))
	if err != nil {
		return nil, err
	}
	d.controller = c
	if d.cfg.Runtime == RuntimeProcess {
		// The process runtime re-enqueues a cluster as soon as a replica it started is ready.
		return []daemon.Runnable{c, d.proc}, nil
	}
	return []daemon.Runnable{c}, nil
}

// listClusters returns every cluster componentd may have to act on: those in the clusters
// bucket and those it still holds components of.
func (d *Daemon) listClusters(ctx context.Context) ([]string, error) {
	return reconcile.ClusterKeys(d.clusters, d.components)(ctx)
}

// stop is the daemon's Spec.Stop: it stops watching the processes and leaves them running,
// so the next componentd re-adopts them.
func (d *Daemon) stop(context.Context) error { return d.proc.Close() }

// StopAll stops every control-plane process this componentd (or an earlier one on the same
// data dir) started, for a full shutdown such as the end of hostplane dev. The cluster
// records stay: a later componentd starts the control planes again. After StopAll the
// daemon starts no more processes. It may be called before or after Run returned.
func (d *Daemon) StopAll(ctx context.Context) error {
	d.halted.Store(true)
	d.halt.Lock() // waits for reconciles in flight
	defer d.halt.Unlock()
	return d.proc.StopAll(ctx)
}
