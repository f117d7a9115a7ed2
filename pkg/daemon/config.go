package daemon

import (
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Base is the configuration every daemon has. Zero values get defaults in Validate.
type Base struct {
	NATSURL      string // HOSTPLANE_NATS_URL, default nats://127.0.0.1:4222
	DataDir      string // HOSTPLANE_DATA_DIR, default .hostplane
	AdminAddr    string // HOSTPLANE_<DAEMON>_ADDR; "" serves no admin port (hostplane dev's front door serves the routes)
	LogLevel     string // HOSTPLANE_LOG_LEVEL: debug, info, warn, error
	OTLPEndpoint string // HOSTPLANE_OTLP_ENDPOINT: traces are exported there when set

	// Injected by an embedding process (hostplane dev, tests); created when nil.
	Logger         *slog.Logger
	Registry       *prometheus.Registry
	TracerProvider trace.TracerProvider
}

// Validate fills defaults and checks the fields.
func (b *Base) Validate() error {
	if b.NATSURL == "" {
		b.NATSURL = "nats://127.0.0.1:4222"
	}
	if b.DataDir == "" {
		b.DataDir = ".hostplane"
	}
	switch strings.ToLower(b.LogLevel) {
	case "", "info", "debug", "warn", "error":
	default:
		return errors.New("log level must be one of debug, info, warn, error")
	}
	return nil
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
	fs.StringVar(&b.DataDir, "data-dir", env("HOSTPLANE_DATA_DIR", ".hostplane"), "data directory (HOSTPLANE_DATA_DIR)")
	addrEnv := "HOSTPLANE_" + strings.ToUpper(name) + "_ADDR"
	fs.StringVar(&b.AdminAddr, "addr", env(addrEnv, "127.0.0.1:0"), "admin and API listen address ("+addrEnv+")")
	fs.StringVar(&b.LogLevel, "log-level", env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error (HOSTPLANE_LOG_LEVEL)")
	fs.StringVar(&b.OTLPEndpoint, "otlp-endpoint", env("HOSTPLANE_OTLP_ENDPOINT", ""), "OTLP/HTTP trace endpoint host:port (HOSTPLANE_OTLP_ENDPOINT)")
	return b
}

// Env returns the environment variable key, or def when it is unset or empty.
func Env(key, def string) string { return env(key, def) }

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
