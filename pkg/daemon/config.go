package daemon

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/natsauth"
)

// Base is the configuration every daemon has. Zero values get defaults in Validate.
type Base struct {
	NATSURL string // HOSTPLANE_NATS_URL, default nats://127.0.0.1:4222
	// NATSNKeyFile is the file holding the daemon's NATS nkey seed (HOSTPLANE_NATS_NKEY_FILE,
	// --nats-nkey-file): the daemon connects as its own identity, with the permissions
	// pkg/natsauth generates for it. "" connects without credentials.
	NATSNKeyFile string
	// NATSTLS is how the daemon uses TLS to NATS: NATSTLS.CAFile (HOSTPLANE_NATS_CA_FILE,
	// --nats-ca-file) is the CA that signed the server's certificate; CertFile and KeyFile
	// (HOSTPLANE_NATS_CERT_FILE, HOSTPLANE_NATS_KEY_FILE, --nats-cert-file, --nats-key-file)
	// are the daemon's client certificate for a server that asks for mutual TLS. Empty: the
	// connection is plain text unless the server requires TLS (then the system's roots
	// verify it).
	NATSTLS natsauth.TLS
	// NATSReplicas is how many copies JetStream keeps of hostplane's streams and buckets
	// (HOSTPLANE_NATS_REPLICAS, 1 to 5, default 1): 3 on a 3-server NATS cluster.
	NATSReplicas int
	DataDir      string // HOSTPLANE_DATA_DIR, default .hostplane
	AdminAddr    string // HOSTPLANE_<DAEMON>_ADDR; "" serves no admin port (hostplane dev's front door serves the routes)
	LogLevel     string // HOSTPLANE_LOG_LEVEL: debug, info, warn, error
	OTLPEndpoint string // HOSTPLANE_OTLP_ENDPOINT: traces are exported there when set
	// ManagementKubeconfig is the kubeconfig file of the management cluster
	// (HOSTPLANE_MANAGEMENT_KUBECONFIG): Cluster API objects, the local platform's machines,
	// and the kubernetes runtime's workloads live there. "" means none: what needs it
	// reports so in its status.
	ManagementKubeconfig string
	// LeaderService ("namespace/name", HOSTPLANE_LEADER_SERVICE) is a headless Service
	// without selector in the management cluster that the leading replica keeps at its own
	// address, PodIP (HOSTPLANE_POD_IP), while it leads (pkg/leaderendpoint): for a daemon
	// that serves clusters' endpoints in its leading replica (infrad, ignitiond) when its
	// replicas are pods. Both or neither, with ManagementKubeconfig.
	LeaderService string
	PodIP         string

	// ReplicaID names this replica in its daemon's leader election (HOSTPLANE_REPLICA_ID,
	// --replica-id; default <host name>:<data dir>). Replicas of one daemon need different
	// ones; a replica restarted with the same one takes its lease back at once (pkg/leader).
	ReplicaID string

	// Access control of the admin router (only used with an AdminAddr). Auth, when set, is
	// used as is; else TokensFile and AdminToken, when either is set, make one (see
	// pkg/auth). Without any of them, a daemon started by Main (the daemon binaries) refuses
	// to start unless InsecureNoAuth is set; an embedding process (tests) that sets none gets
	// an admin router without access control, and a warning in the log.
	Auth               *auth.Authenticator
	TokensFile         string // HOSTPLANE_TOKENS_FILE, --tokens-file
	AdminToken         string // HOSTPLANE_ADMIN_TOKEN (no flag: a command line is visible to every user)
	MetricsRequireAuth bool   // HOSTPLANE_METRICS_REQUIRE_AUTH, --metrics-require-auth (Flags: true unless "false")
	MetricsTokenFile   string // HOSTPLANE_METRICS_TOKEN_FILE, --metrics-token-file: one token of role metrics
	InsecureNoAuth     bool   // --insecure-no-auth: serve the admin API to anyone
	// AdminTLS makes the admin port HTTPS with the daemon's certificate from the management
	// CA and, with a client CA, answers the API only through the gateway (pkg/mtls):
	// HOSTPLANE_ADMIN_TLS_CERT_FILE, HOSTPLANE_ADMIN_TLS_KEY_FILE, HOSTPLANE_ADMIN_CLIENT_CA_FILE,
	// HOSTPLANE_ADMIN_ALLOW_DIRECT=true. The zero value is plain HTTP.
	AdminTLS    mtls.ServerConfig
	requireAuth bool // set by Flags: a standalone daemon needs tokens

	// Injected by an embedding process (hostplane dev, tests); created when nil.
	Logger         *slog.Logger
	Registry       *prometheus.Registry
	TracerProvider trace.TracerProvider
	// Clock is the time that drives behaviour: hibernation schedules and idleness
	// (clusterd, infrad), when a certificate is due for renewal (pkid), Ignition token
	// rotation, grace and expiry (ignitiond), etcd backup schedules (componentd). Tests inject
	// a fake one. Measurements, log and record timestamps, I/O timeouts and retries, and
	// certificates' validity stay on the wall clock, as do the reconcile queue's timers (a
	// RequeueAfter computed on a fake clock fires in real time: a test that steps the clock
	// triggers the reconcile it waits for). Default: the real clock.
	Clock clock.WithTicker
}

// Validate fills defaults and checks the fields.
func (b *Base) Validate() error {
	if b.NATSURL == "" {
		b.NATSURL = "nats://127.0.0.1:4222"
	}
	if b.Clock == nil {
		b.Clock = clock.RealClock{}
	}
	if b.DataDir == "" {
		b.DataDir = ".hostplane"
	}
	if b.NATSReplicas == 0 {
		b.NATSReplicas = 1
	}
	if b.ReplicaID == "" {
		host, _ := os.Hostname()
		dir, err := filepath.Abs(b.DataDir)
		if err != nil {
			dir = b.DataDir
		}
		b.ReplicaID = host + ":" + dir
	}
	if b.NATSReplicas < 1 || b.NATSReplicas > bus.MaxReplicas {
		return fmt.Errorf("NATS replicas (HOSTPLANE_NATS_REPLICAS) must be 1 to %d, not %d", bus.MaxReplicas, b.NATSReplicas)
	}
	if (b.NATSTLS.CertFile == "") != (b.NATSTLS.KeyFile == "") {
		return errors.New("a NATS client certificate needs both HOSTPLANE_NATS_CERT_FILE and HOSTPLANE_NATS_KEY_FILE (--nats-cert-file, --nats-key-file)")
	}
	if err := b.AdminTLS.Validate(); err != nil {
		return err
	}
	if (b.LeaderService == "") != (b.PodIP == "") {
		return errors.New("a leader Service needs both HOSTPLANE_LEADER_SERVICE and HOSTPLANE_POD_IP (--leader-service, --pod-ip)")
	}
	if b.LeaderService != "" {
		if _, _, ok := b.leaderService(); !ok {
			return fmt.Errorf("HOSTPLANE_LEADER_SERVICE (--leader-service) must be namespace/name, not %q", b.LeaderService)
		}
		if b.ManagementKubeconfig == "" {
			return errors.New("HOSTPLANE_LEADER_SERVICE needs the management cluster's kubeconfig (HOSTPLANE_MANAGEMENT_KUBECONFIG)")
		}
	}
	switch strings.ToLower(b.LogLevel) {
	case "", "info", "debug", "warn", "error":
	default:
		return errors.New("log level must be one of debug, info, warn, error")
	}
	return nil
}

// leaderService splits LeaderService into its namespace and name.
func (b *Base) leaderService() (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(b.LeaderService, "/")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, "/")
}

func (b *Base) level() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(b.LogLevel))
	return l
}

// Flags registers the base flags on fs, with defaults from HOSTPLANE_* environment
// variables, and returns the Base they fill.
func Flags(fs *flag.FlagSet, name string) *Base {
	b := &Base{}
	fs.StringVar(&b.NATSURL, "nats-url", env("HOSTPLANE_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL (HOSTPLANE_NATS_URL)")
	fs.StringVar(&b.NATSNKeyFile, "nats-nkey-file", env("HOSTPLANE_NATS_NKEY_FILE", ""), "file with the daemon's NATS nkey seed (HOSTPLANE_NATS_NKEY_FILE)")
	fs.StringVar(&b.NATSTLS.CAFile, "nats-ca-file", env("HOSTPLANE_NATS_CA_FILE", ""), "PEM file of the CA that signed the NATS server's certificate (HOSTPLANE_NATS_CA_FILE)")
	fs.StringVar(&b.NATSTLS.CertFile, "nats-cert-file", env("HOSTPLANE_NATS_CERT_FILE", ""), "PEM client certificate for NATS mutual TLS (HOSTPLANE_NATS_CERT_FILE)")
	fs.StringVar(&b.NATSTLS.KeyFile, "nats-key-file", env("HOSTPLANE_NATS_KEY_FILE", ""), "PEM private key of --nats-cert-file (HOSTPLANE_NATS_KEY_FILE)")
	fs.Var(&replicasFlag{&b.NATSReplicas}, "nats-replicas", "copies JetStream keeps of each stream and bucket, 1 to 5; 3 on a 3-server NATS cluster (HOSTPLANE_NATS_REPLICAS, default 1)")
	if v := os.Getenv("HOSTPLANE_NATS_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1 // Validate names the setting
		}
		b.NATSReplicas = n
	}
	fs.StringVar(&b.DataDir, "data-dir", env("HOSTPLANE_DATA_DIR", ".hostplane"), "data directory (HOSTPLANE_DATA_DIR)")
	addrEnv := "HOSTPLANE_" + strings.ToUpper(name) + "_ADDR"
	fs.StringVar(&b.AdminAddr, "addr", env(addrEnv, "127.0.0.1:0"), "admin and API listen address ("+addrEnv+")")
	fs.StringVar(&b.ReplicaID, "replica-id", env("HOSTPLANE_REPLICA_ID", ""),
		"this replica's name in the daemon's leader election; unique per replica (HOSTPLANE_REPLICA_ID, default <host name>:<data dir>)")
	fs.StringVar(&b.LogLevel, "log-level", env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error (HOSTPLANE_LOG_LEVEL)")
	fs.StringVar(&b.ManagementKubeconfig, "management-kubeconfig", env("HOSTPLANE_MANAGEMENT_KUBECONFIG", ""), "kubeconfig of the management cluster (HOSTPLANE_MANAGEMENT_KUBECONFIG)")
	fs.StringVar(&b.LeaderService, "leader-service", env("HOSTPLANE_LEADER_SERVICE", ""),
		"namespace/name of a headless Service the leading replica keeps at --pod-ip in the management cluster (HOSTPLANE_LEADER_SERVICE)")
	fs.StringVar(&b.PodIP, "pod-ip", env("HOSTPLANE_POD_IP", ""), "this replica's pod address, for --leader-service (HOSTPLANE_POD_IP)")
	fs.StringVar(&b.OTLPEndpoint, "otlp-endpoint", env("HOSTPLANE_OTLP_ENDPOINT", ""), "OTLP/HTTP trace endpoint host:port (HOSTPLANE_OTLP_ENDPOINT)")
	fs.StringVar(&b.TokensFile, "tokens-file", env(auth.EnvTokensFile, ""), "YAML or JSON list of API tokens {token, role, clusters} ("+auth.EnvTokensFile+")")
	b.AdminToken = os.Getenv(auth.EnvAdminToken)
	// Its series name every cluster: a standalone daemon serves /metrics to a token only,
	// unless told otherwise.
	fs.BoolVar(&b.MetricsRequireAuth, "metrics-require-auth", env(EnvMetricsRequireAuth, "true") != "false",
		"require a token for /metrics, any role (HOSTPLANE_METRICS_REQUIRE_AUTH=false opens it to anyone who reaches the port)")
	fs.StringVar(&b.MetricsTokenFile, "metrics-token-file", env(EnvMetricsTokenFile, ""),
		"file holding the token of role metrics Prometheus scrapes /metrics with, re-read when it changes (hostplane credentials init makes one) ("+EnvMetricsTokenFile+")")
	fs.StringVar(&b.AdminTLS.CertFile, "admin-tls-cert-file", env("HOSTPLANE_ADMIN_TLS_CERT_FILE", ""),
		"PEM certificate of the admin port: set, it serves HTTPS only, re-reading the file when it changes (HOSTPLANE_ADMIN_TLS_CERT_FILE)")
	fs.StringVar(&b.AdminTLS.KeyFile, "admin-tls-key-file", env("HOSTPLANE_ADMIN_TLS_KEY_FILE", ""), "its private key (HOSTPLANE_ADMIN_TLS_KEY_FILE)")
	fs.StringVar(&b.AdminTLS.ClientCAFile, "admin-client-ca-file", env("HOSTPLANE_ADMIN_CLIENT_CA_FILE", ""),
		"management CA: the API answers only a client certificate it signed for the gateway; /healthz, /readyz, /metrics stay open (HOSTPLANE_ADMIN_CLIENT_CA_FILE)")
	fs.BoolVar(&b.AdminTLS.AllowDirect, "admin-allow-direct", env("HOSTPLANE_ADMIN_ALLOW_DIRECT", "") == "true",
		"with a client CA, also answer API calls that do not come through the gateway (bearer tokens still apply) (HOSTPLANE_ADMIN_ALLOW_DIRECT=true)")
	fs.BoolVar(&b.InsecureNoAuth, "insecure-no-auth", false, "serve the admin API without access control when no token is configured")
	b.requireAuth = true
	return b
}

// Environment variables of the metrics' access control (Flags).
const (
	EnvMetricsRequireAuth = "HOSTPLANE_METRICS_REQUIRE_AUTH"
	EnvMetricsTokenFile   = "HOSTPLANE_METRICS_TOKEN_FILE"
)

// MetricsTokenName is the name of the token of Base.MetricsTokenFile, in logs.
const MetricsTokenName = "metrics"

// replicasFlag parses --nats-replicas.
type replicasFlag struct{ n *int }

func (f *replicasFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return "1"
	}
	return strconv.Itoa(*f.n)
}

func (f *replicasFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > bus.MaxReplicas {
		return fmt.Errorf("want a number of replicas from 1 to %d", bus.MaxReplicas)
	}
	*f.n = n
	return nil
}

// authenticator returns the admin router's access control: nil means none.
func (b *Base) authenticator() (*auth.Authenticator, error) {
	switch {
	case b.AdminAddr == "":
		return nil, nil
	case b.Auth != nil:
		return b.Auth, nil
	case b.TokensFile != "" || b.AdminToken != "" || b.MetricsTokenFile != "":
		cfg := auth.Config{TokensFile: b.TokensFile, AdminToken: b.AdminToken, MetricsRequireAuth: b.MetricsRequireAuth, Logger: b.Logger}
		if b.MetricsTokenFile != "" {
			cfg.TokenFiles = []auth.TokenFile{{Path: b.MetricsTokenFile, Name: MetricsTokenName, Role: auth.RoleMetrics}}
		}
		return auth.New(cfg)
	case b.requireAuth && !b.InsecureNoAuth:
		return nil, ErrNoTokens
	}
	return nil, nil
}

// PositiveOr returns d, or def when d is zero or negative: a Config's duration left unset.
func PositiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Env returns the environment variable key, or def when it is unset or empty.
func Env(key, def string) string { return env(key, def) }

// EnvAs returns the environment variable key as parse reads it, or def when it is unset or
// does not parse.
func EnvAs[T any](key string, def T, parse func(string) (T, error)) T {
	if v, err := parse(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
