package pkid

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Name is the daemon's name.
const Name = "pkid"

// Defaults of Config.
const (
	DefaultCALifetime    = 10 * 365 * 24 * time.Hour
	DefaultLeafLifetime  = 365 * 24 * time.Hour
	DefaultRenewFraction = 2.0 / 3.0
	// SealKeyFileName is the seal key's file name in the top data dir.
	SealKeyFileName = "pki.key"
)

// Config is pkid's configuration. Zero values get defaults.
type Config struct {
	daemon.Base
	// SealKeyFile is the AES-256 key private keys and kubeconfigs are sealed with
	// (HOSTPLANE_PKI_KEY_FILE); default <Base.DataDir>/pki.key, created on first use.
	SealKeyFile string
	// RenewFraction is the part of a leaf's lifetime after which it is renewed, in (0, 1);
	// default 2/3.
	RenewFraction float64
	// CALifetime and LeafLifetime apply when a cluster's spec.pki does not say (or says
	// something invalid); defaults 10 years and 1 year.
	CALifetime, LeafLifetime time.Duration
}

// Validate fills defaults and checks the fields.
func (c *Config) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	c.SealKeyFile = cmp.Or(c.SealKeyFile, filepath.Join(c.DataDir, SealKeyFileName))
	c.RenewFraction = cmp.Or(c.RenewFraction, DefaultRenewFraction)
	if c.RenewFraction <= 0 || c.RenewFraction >= 1 {
		return fmt.Errorf("%w: renew fraction %v must be between 0 and 1", ErrInvalidConfig, c.RenewFraction)
	}
	c.CALifetime = cmp.Or(c.CALifetime, DefaultCALifetime)
	c.LeafLifetime = cmp.Or(c.LeafLifetime, DefaultLeafLifetime)
	if c.CALifetime < 0 || c.LeafLifetime < 0 {
		return fmt.Errorf("%w: lifetimes must be positive", ErrInvalidConfig)
	}
	return nil
}

// RegisterFlags adds pkid's own flags to fs and returns the Config they fill.
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.StringVar(&cfg.SealKeyFile, "pki-key-file", daemon.Env("HOSTPLANE_PKI_KEY_FILE", ""),
		"AES-256 key file sealing private keys at rest; default <data-dir>/pki.key (HOSTPLANE_PKI_KEY_FILE)")
	fs.Float64Var(&cfg.RenewFraction, "renew-fraction", daemon.EnvAs("HOSTPLANE_PKI_RENEW_FRACTION", DefaultRenewFraction, parseFloat),
		"part of a leaf certificate's lifetime after which it is renewed (HOSTPLANE_PKI_RENEW_FRACTION)")
	return &cfg
}

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// Daemon is a running pkid.
type Daemon struct {
	*daemon.Daemon
	cfg     Config
	metrics *metrics

	// Set by setup, before the runtime is published (handlers run behind daemon.Started).
	seal         *certs.SealKey
	pki          *store.Store[api.ClusterPKI]
	clusters     *store.Store[api.Cluster]
	infra        *store.Store[api.Infra]
	controlplane *store.Store[api.ControlPlaneComponent]
	outbox       *outbox.Outbox
	controller   *reconcile.Controller
	// guests are the guest clusters' admin clients (Secret rewrites of a key rotation).
	guests *guest.Clients
	// approver approves guest kubelet CSRs; nil without a management cluster.
	approver *approver
	// bound is where the requesters' kubeconfigs' binding was applied.
	bound bindings
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	d := &Daemon{cfg: cfg, metrics: newMetrics()}
	return daemon.Embed(d, &d.Daemon, cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketPKI},
		Setup:   d.setup,
		Routes:  d.routes,
	})
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	seal, err := certs.LoadOrCreateSealKey(d.cfg.SealKeyFile)
	if err != nil {
		return nil, err
	}
	d.seal = seal
	if err := d.metrics.register(rt.Registry); err != nil {
		return nil, err
	}
	st, err := daemon.OpenStores(ctx, rt)
	if err != nil {
		return nil, err
	}
	d.pki, d.clusters, d.infra, d.controlplane = st.PKI, st.Clusters, st.Infra, st.Components
	d.outbox = rt.Outbox
	d.guests = guest.NewClients(d.pki, seal, guest.WithInfra(d.infra))

	c, err := rt.Controller(reconcile.Config{
		Name: Name,
		FilterSubjects: []string{
			events.ResourceFilter(events.ResourceCluster),
			events.ResourceFilter(events.ResourceInfra),
			events.ResourceFilter(events.ResourceComponent),
		},
		ListKeys: d.listKeys,
	}, reconcile.Func(d.reconcile))
	if err != nil {
		return nil, err
	}
	d.controller = c
	runnables := []daemon.Runnable{c}
	if d.cfg.ManagementKubeconfig == "" {
		rt.Log.Warn("kubelet CSRs are left pending: pkid approves only CSRs of Cluster API Machines, and has no management cluster (HOSTPLANE_MANAGEMENT_KUBECONFIG)")
		return runnables, nil
	}
	mgmt, err := managementClient(d.cfg.ManagementKubeconfig)
	if err != nil {
		return nil, err
	}
	pools, err := daemon.Open[api.NodePool](ctx, rt, bus.BucketNodePools)
	if err != nil {
		return nil, err
	}
	d.approver = newApprover(rt.Log, d.guests, mgmt, pools, d.metrics)
	return append(runnables, d.approver), nil
}

// managementClient reads Cluster API's Machines from the management cluster of kubeconfig
// file path.
func managementClient(path string) (client.Reader, error) {
	kc, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the management kubeconfig: %w", err)
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("management kubeconfig %s: %w", path, err)
	}
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// listKeys is every cluster pkid may have work for: the clusters (issuance) and its own
// records (rotation, deletion of records whose cluster is gone).
func (d *Daemon) listKeys(ctx context.Context) ([]string, error) {
	return reconcile.ClusterKeys(d.clusters, d.pki)(ctx)
}
