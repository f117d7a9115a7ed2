// Package dev is `hostplane dev`: the whole of Hostplane in one process — an embedded NATS
// JetStream server, a local management kube-apiserver (etcd + kube-apiserver through the
// process supervisor), all six daemons, and one HTTP front door that serves every daemon's
// /v1 routes, an aggregate /healthz, /readyz and /metrics, and the web console at /ui.
//
// Stopping it stops everything it started; starting it again on the same data dir resumes.
package dev

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/cmd/hostplane/internal/console"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/registry"
	"github.com/hostplane/hostplane/services/clusterd"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/ignitiond"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/localcloud"
	"github.com/hostplane/hostplane/services/nodepoold"
	"github.com/hostplane/hostplane/services/pkid"
)

// Config configures the dev stack.
type Config struct {
	DataDir  string // default .hostplane
	Addr     string // front door; default 127.0.0.1:8080 ("127.0.0.1:0" picks a port)
	NATSPort int    // default 4222; -1 picks a free port
	// NoManagementAPIServer skips the local management kube-apiserver (tests of the daemons
	// alone).
	NoManagementAPIServer bool
	Logger                *slog.Logger
	// InfraHost is the address the clusters' endpoints, load balancers and Ignition servers
	// are on (infrad.Config.Host; default 127.0.0.1). Real nodes in containers on this host
	// need one they can reach, such as the Docker bridge's gateway (172.17.0.1).
	InfraHost string
	// GuestImagesDir holds hostplane-pause, hostplane-echo and hostplane-netd, the binaries of the guest
	// images pushed to the registry (default: the directory of the running executable,
	// where make run builds them).
	GuestImagesDir string
	// Runtime is componentd's control-plane runtime: componentd.RuntimeProcess (default) or
	// componentd.RuntimeKubernetes, which runs the control planes as workloads in the
	// management kube-apiserver (and so needs it).
	Runtime string
	// ManagementNodes is how many kubelet nodes the management cluster has under the
	// kubernetes runtime (kubelets.go; default DefaultManagementNodes). Unused under the
	// process runtime, whose management apiserver has no nodes.
	ManagementNodes int
	// MinBackupInterval is clusterd's shortest allowed etcd backup schedule interval
	// (default clusterd.DefaultMinBackupInterval; tests lower it), MaxBackupsPerCluster
	// componentd's bound on a cluster's on-demand backups (default
	// componentd.DefaultMaxBackupsPerCluster).
	MinBackupInterval    time.Duration
	MaxBackupsPerCluster int
	// KarpenterBinary is the hostplane-karpenter executable componentd runs as a cluster's
	// autoscaler; empty: HOSTPLANE_KARPENTER_BINARY when set, else hostplane-karpenter beside
	// this executable or on PATH.
	KarpenterBinary string
	// ComponentTuning selects the release catalogue's component settings the control planes
	// run with (componentd.Config.Tuning; default $HOSTPLANE_COMPONENT_TUNING, else all).
	ComponentTuning string
	// BackupStoreURL, if set, is the S3-compatible store componentd keeps etcd snapshots in
	// (componentd.Config.BackupStoreURL; default HOSTPLANE_BACKUP_STORE_URL, with
	// HOSTPLANE_BACKUP_STORE_CA_FILE and HOSTPLANE_BACKUP_STORE_REGION as componentd reads them).
	BackupStoreURL string

	// AdminToken is the front door's admin token. Empty: HOSTPLANE_ADMIN_TOKEN when set, else
	// the token in <DataDir>/admin-token, which the first start creates (mode 0600) with a
	// fresh random token and later starts reuse.
	AdminToken string
	// TokensFile adds the tokens of a tokens file (see pkg/auth); empty:
	// HOSTPLANE_TOKENS_FILE when set.
	TokensFile string
	// MetricsRequireAuth makes the front door's /metrics need a token.
	MetricsRequireAuth bool
	// GrafanaURL is the base URL of a Grafana with the dashboards of deploy/grafana; the web
	// console (/ui) links into them. Empty hides the links.
	GrafanaURL string

	// Replicas is how many replicas of each daemon run (default 1). Each replica competes
	// for its daemon's lease (pkg/leader); the front door routes to the one that leads, and a
	// stopped replica starts again (see ReplicaSet).
	Replicas int

	// NATSTrace makes the embedded NATS record every subject each identity publishes and
	// subscribes to (Stack.NATSUsage), for tests that compare the natsauth table with what
	// the daemons do. It costs a log line per message.
	NATSTrace bool

	// OTLPEndpoint is where the daemons export traces (see docs/tracing.md); empty:
	// HOSTPLANE_OTLP_ENDPOINT when set, else nowhere.
	OTLPEndpoint string
	// TracerProvider, when set, gives each daemon (by name: "clusterd", ...) the tracer
	// provider it uses instead of making its own; a nil result makes its own. Tests pass
	// providers that share an in-memory exporter.
	TracerProvider func(daemon string) trace.TracerProvider

	// Clock is the time that drives the daemons' behaviour (daemon.Base.Clock: hibernation
	// schedules, certificate renewal, Ignition tokens, backup schedules); tests pass a fake
	// one to step. Default: the real clock.
	Clock clock.WithTicker
}

// startNATS generates (once) the NATS identities and the TLS CA and server certificate,
// starts the embedded server requiring both and lays out the shared streams and buckets as
// the bootstrap identity.
func (s *Stack) startNATS(ctx context.Context, dataDir string) error {
	var err error
	credsDir := filepath.Join(dataDir, NATSCredsDir)
	if s.NATSCreds, err = natsauth.Generate(credsDir); err != nil {
		return err
	}
	if s.NATSTLS, err = natsauth.GenerateTLS(filepath.Join(dataDir, NATSTLSDir), natsHosts...); err != nil {
		return err
	}
	s.natsLog = natsauth.NewServerLog(s.NATSCreds)
	s.natsLog.OnViolation = func(identity, line string) {
		s.log.Error("nats permission violation", "identity", identity, "detail", line)
	}
	store := filepath.Join(dataDir, "nats")
	s.NATS, err = bus.RunEmbedded(bus.EmbeddedConfig{Port: s.cfg.NATSPort, StoreDir: store, Users: s.NATSCreds.ServerNkeys(), Logger: s.natsLog, Trace: s.cfg.NATSTrace,
		TLS: s.NATSTLS.Server()})
	if err != nil {
		return err
	}
	s.log.Info("nats jetstream started", "url", s.NATS.URL(), "store", store, "credentials", credsDir, "ca", s.NATSTLS.CAFile())
	return natsauth.LayOut(ctx, s.NATS.URL(), s.NATSCreds.SeedFile(natsauth.Bootstrap), s.NATSTLS.Client(), 1, s.log)
}

// natsHosts are the names the embedded server's certificate is for: it listens on loopback.
var natsHosts = []string{"127.0.0.1", "localhost", "::1"}

// credsReloadInterval is how often hostplane dev looks for identities minted or revoked with
// `hostplane credentials` while it runs.
const credsReloadInterval = time.Second

// reloadCredentials gives the embedded server the users of the credentials directory whenever
// its auth.conf changes (hostplane credentials create/revoke write it), until ctx ends: a
// minted identity may connect within a second and a revoked one is disconnected and refused.
// Likewise it reloads the server's TLS certificate and key when their files change.
func (s *Stack) reloadCredentials(ctx context.Context) {
	conf := filepath.Join(s.NATSCreds.Dir, natsauth.ServerConfigFile)
	last, _ := os.ReadFile(conf)
	lastTLS := s.serverTLSFiles()
	t := time.NewTicker(credsReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cur := s.serverTLSFiles(); !bytes.Equal(cur, lastTLS) {
			if err := s.NATS.ReloadTLS(); err != nil {
				s.log.Error("nats server certificate changed but could not be applied", "dir", s.NATSTLS.Dir, "err", err)
			} else {
				lastTLS = cur
				s.log.Info("nats server certificate reloaded", "dir", s.NATSTLS.Dir)
			}
		}
		cur, err := os.ReadFile(conf)
		if err != nil || bytes.Equal(cur, last) {
			continue
		}
		creds, err := natsauth.Generate(s.NATSCreds.Dir)
		if err == nil {
			err = s.NATS.SetUsers(creds.ServerNkeys())
		}
		if err != nil {
			s.log.Error("nats credentials changed but could not be applied", "dir", s.NATSCreds.Dir, "err", err)
			continue
		}
		s.natsLog.SetCredentials(creds)
		last = cur
		s.log.Info("nats credentials reloaded", "dir", creds.Dir)
	}
}

// serverTLSFiles is the content of the embedded server's certificate and key files.
func (s *Stack) serverTLSFiles() []byte {
	st := s.NATSTLS.Server()
	crt, _ := os.ReadFile(st.CertFile)
	key, _ := os.ReadFile(st.KeyFile)
	return append(crt, key...)
}

// NATSCredsDir is the directory under the data dir with the NATS identities' seeds.
const NATSCredsDir = "nats-creds"

// NATSTLSDir is the directory under the data dir with the NATS CA and the server's
// certificate (pkg/natsauth.GenerateTLS).
const NATSTLSDir = "nats-tls"

// ConnectNATS connects to the embedded NATS as identity (natsauth.Admin to inspect
// anything), over TLS.
func (s *Stack) ConnectNATS(ctx context.Context, identity string) (*nats.Conn, error) {
	opts, err := natsauth.ClientOptions(identity, s.NATSCreds.SeedFile(identity), s.NATSTLS.Client())
	if err != nil {
		return nil, err
	}
	return bus.Connect(ctx, s.NATS.URL(), "hostplane-dev-"+identity, s.log, opts...)
}

// NATSViolations are the permission violations the embedded NATS saw, each naming the
// identity: a daemon needed a subject pkg/natsauth's table does not give it.
func (s *Stack) NATSViolations() []string { return s.natsLog.Violations() }

// NATSUsage is what each identity published and subscribed to (with Config.NATSTrace).
func (s *Stack) NATSUsage() map[string]natsauth.Usage { return s.natsLog.Usage() }

// AdminTokenFile is the file under the data dir that holds the generated admin token.
const AdminTokenFile = "admin-token"

// Daemon is what the stack needs of each daemon.
type Daemon interface {
	Name() string
	Run(ctx context.Context) error
	Routes(r chi.Router)
	Ready(ctx context.Context) error
}

// Stack is a running dev stack.
type Stack struct {
	cfg  Config
	log  *slog.Logger
	NATS *bus.Embedded
	// NATSCreds are the NATS identities under <data dir>/nats-creds (pkg/natsauth): the
	// embedded server accepts only them, each daemon connects as its own.
	NATSCreds *natsauth.Credentials
	// NATSTLS is the CA and the server certificate under <data dir>/nats-tls: the embedded
	// server accepts TLS clients only, and every client verifies it with the CA.
	NATSTLS    *natsauth.TLSFiles
	natsLog    *natsauth.ServerLog
	Management *localkube.Cluster
	Daemons    []Daemon
	mgmtSup    *process.Supervisor
	// Under the kubernetes runtime: the management cluster with kubelet nodes, its volume
	// provisioner, and the resolver to put back (kubelets.go).
	mgmtCluster     *mgmtcluster.Cluster
	stopVolumes     context.CancelFunc
	volumesDone     chan struct{}
	restoreResolver func()
	server          *httpapi.Server
	adminToken      string
	// Registry is the OCI registry real nodes pull from (nil when it is not built);
	// dnsImage its CoreDNS image ("" when it lacks one: componentd's default then),
	// netImage its hostplane-netd image ("" when it lacks one).
	Registry           *registry.Registry
	dnsImage, netImage string
	// Cloud is the local platform's cloud, run in-process; its machines stop with the stack
	// and resume on the next start (their state stays under <data dir>/localcloud).
	Cloud       *localcloud.Cloud
	cloudCancel context.CancelFunc
	cloudDone   chan struct{}
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	errs        chan error
}

// Start brings the stack up and returns once the front door listens (daemons become ready
// in the background; /healthz says when).
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.prepare(); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, log: cfg.Logger, errs: make(chan error, 16)}
	ok := false
	defer func() {
		if !ok {
			s.Stop(context.WithoutCancel(ctx))
		}
	}()

	authn, err := s.authenticator()
	if err != nil {
		return nil, err
	}
	if err := s.startNATS(ctx, cfg.DataDir); err != nil {
		return nil, err
	}
	if err := s.startManagement(ctx); err != nil {
		return nil, err
	}
	if err := s.startCloud(ctx, filepath.Join(cfg.DataDir, "localcloud")); err != nil {
		return nil, err
	}
	if err := s.startRegistry(ctx); err != nil {
		return nil, err
	}
	registries, err := s.buildDaemons()
	if err != nil {
		return nil, err
	}

	front := observe.NewRegistry()
	router := Router(httpapi.Config{
		Name: "frontdoor", Logger: s.log, Registry: front,
		Gatherer: append(prometheus.Gatherers{front}, registries...),
		Ready:    s.Ready,
		Health:   s.health,
	}, authn, s.Daemons...)
	console.Mount(router, console.Config{GrafanaURL: cfg.GrafanaURL})
	if err := s.run(ctx, router); err != nil {
		return nil, err
	}
	ok = true
	s.log.Info("hostplane dev is up", "api", "http://"+s.server.Addr(), "data_dir", cfg.DataDir)
	return s, nil
}

// prepare fills in cfg's defaults (DataDir made absolute and created), and refuses a
// configuration that cannot run.
func (cfg *Config) prepare() error {
	if cfg.DataDir == "" {
		cfg.DataDir = ".hostplane"
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.NATSPort == 0 {
		cfg.NATSPort = 4222
	}
	if cfg.Logger == nil {
		cfg.Logger = observe.NewLogger(os.Stderr, slog.LevelInfo)
	}
	if cfg.OTLPEndpoint == "" {
		cfg.OTLPEndpoint = os.Getenv("HOSTPLANE_OTLP_ENDPOINT")
	}
	if err := (console.Config{GrafanaURL: cfg.GrafanaURL}).Validate(); err != nil {
		return fmt.Errorf("grafana URL: %w", err)
	}
	if cfg.Replicas < 0 || cfg.Replicas > maxReplicas {
		return fmt.Errorf("replicas: want 1 to %d replicas of each daemon, not %d", maxReplicas, cfg.Replicas)
	}
	if cfg.Runtime == componentd.RuntimeKubernetes && cfg.NoManagementAPIServer {
		return fmt.Errorf("the %s runtime runs the control planes in the management kube-apiserver: it cannot go without one", cfg.Runtime)
	}
	if cfg.ManagementNodes == 0 {
		cfg.ManagementNodes = DefaultManagementNodes
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	cfg.DataDir = dataDir
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}

// startManagement starts the management kube-apiserver (localkube, with the controllers
// Cluster API needs) unless the config goes without one.
func (s *Stack) startManagement(ctx context.Context) error {
	if s.cfg.NoManagementAPIServer {
		return nil
	}
	if s.cfg.Runtime == componentd.RuntimeKubernetes {
		return s.startKubeletManagement(ctx)
	}
	mdir := filepath.Join(s.cfg.DataDir, "management")
	var err error
	s.mgmtSup, err = process.NewSupervisor(filepath.Join(mdir, "run"), s.log.With("component", "management"))
	if err != nil {
		return err
	}
	s.log.Info("starting the management kube-apiserver", "dir", mdir)
	s.Management, err = localkube.Start(ctx, localkube.Config{Dir: mdir, Supervisor: s.mgmtSup, Name: "management", Log: s.log,
		Controllers: localkube.ManagementControllers})
	if err != nil {
		return fmt.Errorf("management kube-apiserver: %w", err)
	}
	s.log.Info("management kube-apiserver ready", "url", s.Management.URL, "kubeconfig", s.Management.KubeconfigPath)
	return nil
}

// buildDaemons builds a replica set of each of the six daemons (Config.Replicas replicas; one
// by default, started again when it loses its lease) into s.Daemons and returns their metric
// registries.
func (s *Stack) buildDaemons() (prometheus.Gatherers, error) {
	cfg := s.cfg
	cd := componentd.Config{Runtime: cfg.Runtime, KarpenterBinary: cmp.Or(cfg.KarpenterBinary, os.Getenv("HOSTPLANE_KARPENTER_BINARY")),
		Tuning:            cmp.Or(cfg.ComponentTuning, os.Getenv("HOSTPLANE_COMPONENT_TUNING")),
		BackupStoreURL:    cmp.Or(cfg.BackupStoreURL, os.Getenv("HOSTPLANE_BACKUP_STORE_URL")),
		BackupStoreCAFile: os.Getenv("HOSTPLANE_BACKUP_STORE_CA_FILE"), BackupStoreRegion: os.Getenv("HOSTPLANE_BACKUP_STORE_REGION"),
		MaxBackupsPerCluster: cfg.MaxBackupsPerCluster}
	mgmtKubeconfig := ""
	if s.Management != nil {
		mgmtKubeconfig = s.Management.KubeconfigPath
	}
	// Under the kubernetes runtime each cluster's apiservers are its Service's pods, which
	// the balancers reach by the Service's name (useClusterDNS).
	inf := infrad.Config{Host: cfg.InfraHost, LocalCloudURL: s.Cloud.URL(), APIServerService: s.mgmtCluster != nil}
	var ign ignitiond.Config
	if r := s.nodeRegistry(); r != nil {
		ign.Registry, ign.SandboxImage = r, s.Registry.Ref(PauseRepo, GuestTag)
	}
	cd.DNSImage, cd.NetImage = s.dnsImage, s.netImage
	own := ownConfigs{cl: clusterd.Config{MinBackupInterval: cfg.MinBackupInterval}, cd: cd, inf: inf, ign: ign}
	base := func(name string, reg *prometheus.Registry) daemon.Base {
		var tp trace.TracerProvider
		if cfg.TracerProvider != nil {
			tp = cfg.TracerProvider(name)
		}
		return daemon.Base{NATSURL: s.NATS.URL(), NATSNKeyFile: s.NATSCreds.SeedFile(name), NATSTLS: s.NATSTLS.Client(), DataDir: cfg.DataDir, Logger: s.log, Registry: reg, ManagementKubeconfig: mgmtKubeconfig,
			OTLPEndpoint: cfg.OTLPEndpoint, TracerProvider: tp, Clock: cfg.Clock}
	}
	var registries prometheus.Gatherers
	for _, name := range daemonNames {
		rs, err := newReplicaSet(max(cfg.Replicas, 1), s.log, func(i int) (LeadingDaemon, *prometheus.Registry, error) {
			reg := observe.NewRegistry()
			b := base(name, reg)
			if cfg.Replicas > 1 {
				b.ReplicaID = fmt.Sprintf("%s:%s#%d", name, cfg.DataDir, i)
			}
			d, err := buildDaemon(name, b, own)
			if err != nil {
				return nil, nil, err
			}
			ld, ok := d.(LeadingDaemon)
			if !ok {
				return nil, nil, fmt.Errorf("%s cannot run as replicas", name)
			}
			return ld, reg, nil
		})
		if err != nil {
			return nil, err
		}
		registries = append(registries, rs)
		s.Daemons = append(s.Daemons, rs)
	}
	return registries, nil
}

// run starts every daemon, the credentials reloader and the front door serving router, and
// returns once the front door listens.
func (s *Stack) run(ctx context.Context, router chi.Router) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	for _, d := range s.Daemons {
		s.wg.Go(func() {
			if err := d.Run(runCtx); err != nil {
				s.log.Error("daemon stopped with an error", "daemon", d.Name(), "err", err)
				s.errs <- fmt.Errorf("%s: %w", d.Name(), err)
			}
		})
	}
	s.wg.Go(func() { s.reloadCredentials(runCtx) })
	s.server = httpapi.NewServer(s.cfg.Addr, router, s.log)
	s.wg.Go(func() {
		if err := s.server.Start(runCtx); err != nil {
			s.errs <- fmt.Errorf("front door: %w", err)
		}
	})
	if s.server.Addr() == "" {
		return fmt.Errorf("front door could not listen on %s: %w", s.cfg.Addr, <-s.errs)
	}
	return nil
}

// Daemons builds the six daemons, each with the Base base returns (called once per daemon).
func Daemons(base func() daemon.Base) ([]Daemon, error) {
	return daemons(func(string) daemon.Base { return base() }, ownConfigs{})
}

// daemonNames are the six daemons, in the order hostplane dev starts them.
var daemonNames = []string{"clusterd", "infrad", "pkid", "componentd", "nodepoold", "ignitiond"}

// ownConfigs are the daemons' own settings (their Base is set per daemon).
type ownConfigs struct {
	cl  clusterd.Config
	cd  componentd.Config
	inf infrad.Config
	ign ignitiond.Config
}

// daemons is Daemons with the daemons' own settings own (their Base is base's, called with
// the daemon's name).
func daemons(base func(name string) daemon.Base, own ownConfigs) ([]Daemon, error) {
	var out []Daemon
	for _, name := range daemonNames {
		d, err := buildDaemon(name, base(name), own)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func buildDaemon(name string, base daemon.Base, own ownConfigs) (Daemon, error) {
	cd, inf, ign := own.cd, own.inf, own.ign
	switch name {
	case "clusterd":
		cl := own.cl
		cl.Base = base
		return clusterd.New(cl)
	case "infrad":
		inf.Base = base
		return infrad.New(inf)
	case "pkid":
		return pkid.New(pkid.Config{Base: base})
	case "componentd":
		cd.Base = base
		return componentd.New(cd)
	case "nodepoold":
		return nodepoold.New(nodepoold.Config{Base: base})
	case "ignitiond":
		ign.Base = base
		return ignitiond.New(ign)
	}
	return nil, fmt.Errorf("no daemon %q", name)
}

// maxReplicas is the most replicas of each daemon hostplane dev runs.
const maxReplicas = 5

// StopLeader stops the leading replica of daemon and returns its index; the stack starts it
// again a second later (a standby, when Config.Replicas is above 1, takes over meanwhile).
// -1: no such daemon, or none of its replicas leads.
func (s *Stack) StopLeader(daemon string) int {
	for _, d := range s.Daemons {
		if rs, ok := d.(*ReplicaSet); ok && rs.Name() == daemon {
			return rs.StopLeader()
		}
	}
	return -1
}

// Router builds the front door: a router made with cfg that serves the OpenAPI document on
// /openapi.json, checks every request with authn (nil: no access control) and routes to
// every daemon's /v1 routes.
func Router(cfg httpapi.Config, authn *auth.Authenticator, daemons ...Daemon) chi.Router {
	cfg.OpenAPI = api.OpenAPI()
	if authn != nil {
		cfg.Middlewares = append(cfg.Middlewares, authn.Middleware)
	}
	r := httpapi.NewRouter(cfg)
	for _, d := range daemons {
		d.Routes(r)
	}
	return r
}

// authenticator sets up the front door's access control: the admin token (Config.AdminToken,
// else HOSTPLANE_ADMIN_TOKEN, else <data dir>/admin-token, created on first start) and the
// tokens of the tokens file, if any.
func (s *Stack) authenticator() (*auth.Authenticator, error) {
	token, source := s.cfg.AdminToken, "config"
	if token == "" {
		token, source = os.Getenv(auth.EnvAdminToken), auth.EnvAdminToken
	}
	if token == "" {
		path := filepath.Join(s.cfg.DataDir, AdminTokenFile)
		t, created, err := auth.LoadOrCreateTokenFile(path, 0o600)
		if err != nil {
			return nil, fmt.Errorf("admin token: %w", err)
		}
		token, source = t, path
		if created {
			s.log.Info("generated an admin token for the API; send it as Authorization: Bearer <token>", "file", path)
		} else {
			s.log.Info("using the API admin token of the data dir", "file", path)
		}
	} else {
		s.log.Info("API admin token given", "source", source)
	}
	file := s.cfg.TokensFile
	if file == "" {
		file = os.Getenv(auth.EnvTokensFile)
	}
	a, err := auth.New(auth.Config{TokensFile: file, AdminToken: token, MetricsRequireAuth: s.cfg.MetricsRequireAuth, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("API tokens (admin token from %s): %w", source, err)
	}
	s.adminToken = token
	return a, nil
}

// AdminToken is the front door's admin token.
func (s *Stack) AdminToken() string { return s.adminToken }

// URL is the front door's base URL.
func (s *Stack) URL() string { return "http://" + s.server.Addr() }

// Err delivers the first failure of a daemon or the front door.
func (s *Stack) Err() <-chan error { return s.errs }

// Ready reports nil once every daemon (and the management apiserver) is ready.
func (s *Stack) Ready(ctx context.Context) error {
	var errs []error
	for _, d := range s.Daemons {
		if err := d.Ready(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Stack) health(ctx context.Context) (any, bool) {
	out := map[string]string{}
	healthy := true
	for _, d := range s.Daemons {
		if err := d.Ready(ctx); err != nil {
			out[d.Name()] = err.Error()
			healthy = false
		} else {
			out[d.Name()] = "ready"
		}
	}
	if s.NATS != nil && s.NATS.Running() {
		out["nats"] = "ready"
	} else {
		out["nats"] = "not running"
		healthy = false
	}
	if s.Management != nil {
		out["management-apiserver"] = "ready"
		if p := s.Management.APIServer(); p == nil || p.Status().State != process.StateReady {
			out["management-apiserver"] = "not ready"
			healthy = false
		}
	}
	return out, healthy
}

// Stop stops everything the stack started: the front door and the daemons, every hosted
// control plane's processes, the management apiserver, then NATS.
func (s *Stack) Stop(ctx context.Context) {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.cloudCancel != nil {
		s.cloudCancel()
		<-s.cloudDone
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, d := range s.Daemons {
		if sa, ok := d.(interface{ StopAll(context.Context) error }); ok {
			if err := sa.StopAll(ctx); err != nil {
				s.log.Warn("stop processes", "daemon", d.Name(), "err", err)
			}
		}
	}
	if s.Registry != nil {
		if err := s.Registry.Stop(ctx); err != nil {
			s.log.Warn("stop the registry", "err", err)
		}
	}
	if s.mgmtSup != nil {
		if err := s.mgmtSup.StopAll(ctx); err != nil {
			s.log.Warn("stop management apiserver", "err", err)
		}
	}
	if s.mgmtCluster != nil {
		s.stopKubeletManagement(ctx)
	}
	if s.NATS != nil {
		s.NATS.Stop()
	}
	s.log.Info("hostplane dev stopped")
}

// maxUnixSocketPath is the longest unix socket path Linux accepts (sun_path holds 108 bytes
// with the terminating NUL).
const maxUnixSocketPath = 107

// startCloud runs the local cloud in-process on a unix socket in dir (a loopback TCP port
// when the path is too long for a socket) and waits until it listens.
func (s *Stack) startCloud(ctx context.Context, dir string) error {
	listen := ""
	if len(filepath.Join(dir, localcloud.DefaultSocketName)) > maxUnixSocketPath {
		listen = "127.0.0.1:0"
	}
	cloud, err := localcloud.New(localcloud.Config{Dir: dir, Listen: listen, Logger: s.log.With("component", "localcloud")})
	if err != nil {
		return fmt.Errorf("local cloud: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.Cloud, s.cloudCancel, s.cloudDone = cloud, cancel, make(chan struct{})
	go func() {
		defer close(s.cloudDone)
		if err := cloud.Run(runCtx); err != nil {
			s.errs <- fmt.Errorf("local cloud: %w", err)
		}
	}()
	select {
	case <-cloud.Ready():
		s.log.Info("local cloud started", "url", cloud.URL(), "dir", dir)
		return nil
	case err := <-s.errs:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
