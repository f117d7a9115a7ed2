// Package ignitiond is hostplane's ignitiond daemon: the HTTPS Ignition server machines boot
// from, with rotating tokens (docs/nodepool-flow.md, steps 2 and 5, and rollouts).
//
// Per cluster (bucket "ignition", key "<cluster>", api.IgnitionServer): once infrad allocated
// the cluster's Ignition endpoint (api.Infra.Ignition) and pkid issued its "ignition-server"
// certificate, ignitiond listens there with TLS and serves only GET /ignition and /healthz.
// The certificate is handed out per handshake (tls.Config.GetCertificate), so a PKI rotation
// swaps it without closing the listener. It publishes ignition.server when the record
// changes. When the cluster is deleting or gone it closes the listener, deletes every
// ignition key of the cluster and publishes ignition.deleted. The listeners come back from
// the records after a restart.
//
// Per NodePool (key "<cluster>.<nodepool>", api.IgnitionTokens): once nodepoold computed the
// pool's config hash, ignitiond makes sure the guest bootstrap token (Secret
// kube-system/bootstrap-token-<id>, extra group api.BootstrapGroupPrefix+<nodepool>) and the
// ClusterRoleBinding hostplane:node-bootstrapper exist in the guest cluster, mints a bearer
// token for the hash (Current), and writes the userdata: an Ignition stub pointing at
// https://<endpoint>/ignition with that token, trusting the cluster's root CA. A new hash
// mints a new Current; so does half the token lifetime (rotation, same hash). Either way the
// replaced token becomes Previous and stays valid for the grace period, serving the payload
// of its own hash. It publishes ignition.ready (new hash), ignition.rotated (rotation) and
// ignition.deleted (pool gone: record and guest Secret removed).
//
// GET /ignition looks the bearer token up in an index kept from a watch of the bucket, so
// every record (this process's and the ones it finds after a restart) is served, compares it
// in constant time and answers 401 with an empty body to anything but a valid token of the
// listener's cluster. The payload is an Ignition v3.5 config (pkg/ignition) with the
// bootstrap kubeconfig, the root CA, the kubelet config and the pool's config documents of
// the token's hash; it is validated before it is served and cached per (cluster, nodepool,
// hash, pool generation).
//
// The guest bootstrap token's secret is derived (HKDF) from the cluster's root CA key, the
// pool and the token id, so it needs no storage and survives restarts. While the guest
// cluster is not reachable the token record is written Ready anyway (its userdata does not
// depend on the guest) with a Message, and the guest objects are retried every GuestRetry.
//
// It is an importable package: New(cfg) and Run(ctx), so hostplane dev and the tests run the
// very code cmd/ignitiond runs.
package ignitiond

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Name is the daemon's name.
const Name = "ignitiond"

// Defaults of Config.
const (
	DefaultTokenTTL   = 24 * time.Hour
	DefaultGrace      = 10 * time.Minute
	DefaultJoinWindow = time.Hour
	DefaultGuestRetry = 10 * time.Second
	DefaultGuestClean = 2 * time.Minute
)

// Environment variables of Config's own fields.
const (
	EnvTokenTTL   = "HOSTPLANE_IGNITION_TOKEN_TTL"
	EnvTokenGrace = "HOSTPLANE_IGNITION_TOKEN_GRACE"
	EnvJoinWindow = "HOSTPLANE_IGNITION_JOIN_WINDOW"
	EnvSealKey    = "HOSTPLANE_PKI_KEY_FILE"
)

// Config is ignitiond's configuration. Zero fields get defaults in New.
type Config struct {
	daemon.Base
	// TokenTTL is a bearer token's lifetime; it is rotated at half of it
	// (HOSTPLANE_IGNITION_TOKEN_TTL, --token-ttl; default 24h). Tokens are minted, rotated,
	// retired and checked on Base.Clock.
	TokenTTL time.Duration
	// Grace is how long a replaced token stays valid (HOSTPLANE_IGNITION_TOKEN_GRACE,
	// --token-grace; default 10m). Zero means the default; a replaced token never outlives
	// its own expiry.
	Grace time.Duration
	// JoinWindow is how long a pool's guest bootstrap token outlives the Ignition token whose
	// payload carried it (HOSTPLANE_IGNITION_JOIN_WINDOW, --join-window; default 1h): a
	// machine that fetched its payload at the last moment has that long to ask for its
	// kubelet certificate. Then the guest's kube-apiserver refuses the token (its Secret's
	// expiration, written from Base.Clock) and the tokencleaner removes it.
	JoinWindow time.Duration
	// SealKeyFile opens the keys and kubeconfigs pkid sealed (HOSTPLANE_PKI_KEY_FILE,
	// --pki-key-file; default <data dir>/pki.key).
	SealKeyFile string
	// GuestRetry is how often a pool whose guest cluster is unreachable retries its
	// bootstrap token (default 10s).
	GuestRetry time.Duration
	// GuestCleanupTimeout bounds how long a deleted pool's record waits for its guest
	// bootstrap token to be removed while the guest cluster is unreachable (default 2m); then
	// the record goes and the Secret is removed the next time ignitiond applies a bootstrap
	// token in that cluster. The record's tokens stop at once either way.
	GuestCleanupTimeout time.Duration
	// ListenHost, when set, is where every Ignition listener listens, at its recorded port,
	// instead of the recorded host: for a recorded host that is a name resolving to the
	// leading ignitiond (deploy/k8s: the headless Service ignitiond-endpoints, kept at the
	// leader's pod address; daemon.Base.LeaderService) (HOSTPLANE_IGNITIOND_LISTEN_HOST).
	ListenHost string
	// SandboxImage is the pause image real nodes' containerd starts pod sandboxes from
	// (HOSTPLANE_IGNITION_SANDBOX_IMAGE, --sandbox-image; default DefaultSandboxImage).
	SandboxImage string
	// Registry, when set, is the OCI registry real nodes pull from: its host, CA and the
	// credential their payload carries (hostplane dev: pkg/registry).
	Registry *ignition.Registry
}

// Validate fills defaults and checks the fields.
func (c *Config) Validate() error {
	if err := c.Base.Validate(); err != nil {
		return err
	}
	c.TokenTTL = cmp.Or(c.TokenTTL, DefaultTokenTTL)
	c.Grace = cmp.Or(c.Grace, DefaultGrace)
	c.JoinWindow = cmp.Or(c.JoinWindow, DefaultJoinWindow)
	c.GuestRetry = daemon.PositiveOr(c.GuestRetry, DefaultGuestRetry)
	c.GuestCleanupTimeout = daemon.PositiveOr(c.GuestCleanupTimeout, DefaultGuestClean)
	c.SealKeyFile = cmp.Or(c.SealKeyFile, filepath.Join(c.DataDir, "pki.key"))
	c.SandboxImage = cmp.Or(c.SandboxImage, DefaultSandboxImage)
	if c.TokenTTL < 0 || c.Grace < 0 || c.JoinWindow < 0 {
		return fmt.Errorf("%w: token TTL %v, grace %v and join window %v must be positive", ErrInvalidConfig, c.TokenTTL, c.Grace, c.JoinWindow)
	}
	return nil
}

// RegisterFlags adds ignitiond's own flags to fs and returns the Config they fill.
func RegisterFlags(fs *flag.FlagSet) *Config {
	var cfg Config
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", daemon.EnvAs(EnvTokenTTL, DefaultTokenTTL, time.ParseDuration),
		"lifetime of an Ignition bearer token; rotated at half of it ("+EnvTokenTTL+")")
	fs.DurationVar(&cfg.Grace, "token-grace", daemon.EnvAs(EnvTokenGrace, DefaultGrace, time.ParseDuration),
		"how long a replaced Ignition token stays valid ("+EnvTokenGrace+")")
	fs.DurationVar(&cfg.JoinWindow, "join-window", daemon.EnvAs(EnvJoinWindow, DefaultJoinWindow, time.ParseDuration),
		"how long a pool's guest bootstrap token outlives the Ignition token whose payload carried it ("+EnvJoinWindow+")")
	fs.StringVar(&cfg.SealKeyFile, "pki-key-file", daemon.Env(EnvSealKey, ""),
		"key that opens the sealed PKI ("+EnvSealKey+"; default <data dir>/pki.key)")
	fs.StringVar(&cfg.ListenHost, "listen-host", daemon.Env("HOSTPLANE_IGNITIOND_LISTEN_HOST", ""),
		"where the Ignition listeners listen, at their recorded ports, when the recorded host is a name for the leading ignitiond (HOSTPLANE_IGNITIOND_LISTEN_HOST)")
	fs.StringVar(&cfg.SandboxImage, "sandbox-image", daemon.Env("HOSTPLANE_IGNITION_SANDBOX_IMAGE", DefaultSandboxImage),
		"the pause image real nodes start pod sandboxes from (HOSTPLANE_IGNITION_SANDBOX_IMAGE)")
	return &cfg
}

// DefaultSandboxImage is Config.SandboxImage's default: the pause image of the Kubernetes
// releases hostplane runs.
const DefaultSandboxImage = "registry.k8s.io/pause:3.10"

// Daemon is a running ignitiond.
type Daemon struct {
	*daemon.Daemon
	cfg Config

	// Set by setup, before anything runs.
	log        *slog.Logger
	metrics    *metrics
	outbox     *outbox.Outbox
	seal       *certs.SealKey
	guests     *guest.Clients
	servers    *store.Store[api.IgnitionServer]
	tokens     *store.Store[api.IgnitionTokens]
	clusters   *store.Store[api.Cluster]
	infra      *store.Store[api.Infra]
	pki        *store.Store[api.ClusterPKI]
	nodepools  *store.Store[api.NodePool]
	controller *reconcile.Controller

	index     *tokenIndex
	cache     *payloadCache
	binaries  *nodeBinaries
	listeners *listeners

	mu        sync.Mutex
	ensured   map[string]bool      // "<cluster>/<nodepool>/<id>": guest bootstrap objects applied
	dropping  map[string]time.Time // pool key → first failed removal of its guest bootstrap token
	bootstrap map[string][]byte    // cluster → key the bootstrap token secrets are derived from
}

// New validates cfg and returns the daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	d := &Daemon{cfg: cfg}
	return daemon.Embed(d, &d.Daemon, cfg.Base, daemon.Spec{
		Name:    Name,
		Buckets: []string{bus.BucketIgnition},
		Setup:   d.setup,
		Routes:  d.routes,
		Ready:   d.ready,
		Stop:    d.stop,
	})
}

func (d *Daemon) setup(ctx context.Context, rt *daemon.Runtime) ([]daemon.Runnable, error) {
	m, err := newMetrics(rt.Registry)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	d.log, d.outbox = rt.Log, rt.Outbox
	if d.seal, err = certs.LoadOrCreateSealKey(d.cfg.SealKeyFile); err != nil {
		return nil, err
	}
	kv, err := rt.Bucket(ctx, bus.BucketIgnition)
	if err != nil {
		return nil, err
	}
	d.servers = store.New[api.IgnitionServer](kv)
	d.tokens = store.New[api.IgnitionTokens](kv)
	st, err := daemon.OpenStores(ctx, rt)
	if err != nil {
		return nil, err
	}
	d.clusters, d.infra, d.pki = st.Clusters, st.Infra, st.PKI
	if d.nodepools, err = daemon.Open[api.NodePool](ctx, rt, bus.BucketNodePools); err != nil {
		return nil, err
	}
	d.guests = guest.NewClients(d.pki, d.seal, guest.WithInfra(d.infra))
	d.cache = newPayloadCache()
	d.binaries = newNodeBinaries()
	d.index = newTokenIndex(d.cache.keep)
	d.listeners = newListeners(d.log, m)
	d.mu.Lock()
	d.ensured, d.bootstrap = map[string]bool{}, map[string][]byte{}
	d.dropping = map[string]time.Time{}
	d.mu.Unlock()

	d.controller, err = rt.Controller(reconcile.Config{
		Name: Name,
		FilterSubjects: []string{
			events.ResourceFilter(events.ResourceCluster), events.ResourceFilter(events.ResourceInfra),
			events.ResourceFilter(events.ResourcePKI), events.ResourceFilter(events.ResourceNodePool),
		},
		Keys:     eventKeys,
		ListKeys: d.listKeys,
	}, reconcile.Func(d.reconcile))
	if err != nil {
		return nil, err
	}
	watch := daemon.RunnableFunc(func(ctx context.Context) error { return d.index.watch(ctx, kv, d.log) })
	return []daemon.Runnable{d.controller, watch}, nil
}

// ready holds readiness until the token index has every record.
func (d *Daemon) ready(context.Context) error {
	if !d.index.isSynced() {
		return ErrIndexNotSynced
	}
	return nil
}

// stop closes every listener; the records stay, so the next ignitiond re-opens them.
func (d *Daemon) stop(ctx context.Context) error {
	d.listeners.closeAll(ctx)
	return nil
}

// reconcile dispatches a key: "<cluster>" is the cluster's server, "<cluster>.<nodepool>" a
// pool's tokens.
func (d *Daemon) reconcile(ctx context.Context, key string) (reconcile.Result, error) {
	if cluster, np, ok := api.SplitPartKey(key); ok {
		return d.reconcilePool(ctx, cluster, np)
	}
	return d.reconcileServer(ctx, key)
}

// eventKeys maps an event to keys: a nodepool event whose subject attribute names the pool
// ("<cluster>/<nodepool>") to the pool's key, everything else to the cluster (whose reconcile
// enqueues every pool of the cluster).
func eventKeys(subject string, ev events.Event) ([]string, error) {
	s, err := events.ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	if s.Resource == events.ResourceNodePool {
		for _, sep := range []string{"/", "."} {
			if c, np, ok := strings.Cut(ev.Subject, sep); ok && c == s.Cluster && np != "" && !strings.ContainsAny(np, "./*> ") {
				return []string{api.NodePoolKey(c, np)}, nil
			}
		}
	}
	return []string{s.Cluster}, nil
}

// listKeys is the resync set: every cluster with a cluster record or an ignition record, and
// every pool with a nodepool record or a token record.
func (d *Daemon) listKeys(ctx context.Context) ([]string, error) {
	keys, err := reconcile.ClusterKeys(d.clusters, d.servers)(ctx)
	if err != nil {
		return nil, err
	}
	pools, err := d.poolKeys(ctx, "*")
	if err != nil {
		return nil, err
	}
	return append(keys, pools...), nil
}

// poolKeys returns the pool keys of cluster ("*" for every cluster) that have a nodepool
// record or a token record.
func (d *Daemon) poolKeys(ctx context.Context, cluster string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, l := range []reconcile.KeyLister{d.nodepools, d.tokens} {
		keys, err := l.Keys(ctx, api.ClusterPartsFilter(cluster))
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}
