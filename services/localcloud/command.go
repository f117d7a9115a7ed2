package localcloud

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Environment variables of cmd/localcloud's flags.
const (
	EnvDir    = "HOSTPLANE_LOCALCLOUD_DIR"
	EnvListen = "HOSTPLANE_LOCALCLOUD_LISTEN"
	// EnvTokenFile is the file holding the API's bearer token (Config.TokenFile), for the
	// cloud and for its clients (infrad).
	EnvTokenFile = "HOSTPLANE_LOCALCLOUD_TOKEN_FILE"
)

// Command is cmd/localcloud: it parses args (--dir, --listen, --token-file, --log-level,
// defaulting to HOSTPLANE_LOCALCLOUD_DIR, HOSTPLANE_LOCALCLOUD_LISTEN,
// HOSTPLANE_LOCALCLOUD_TOKEN_FILE and HOSTPLANE_LOG_LEVEL; --insecure-no-auth) and runs a
// Cloud until ctx ends. On a TCP address it needs a token file, unless --insecure-no-auth:
// whoever reaches the API can make and break machines. Logs go to stderr as JSON.
func Command(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", daemon.Env(EnvDir, DefaultDir), "state directory of the machines ("+EnvDir+")")
	listen := fs.String("listen", daemon.Env(EnvListen, ""), "API address: unix:///abs/path.sock or 127.0.0.1:port (default unix://<dir>/"+DefaultSocketName+") ("+EnvListen+")")
	tokenFile := fs.String("token-file", daemon.Env(EnvTokenFile, ""), "file holding the bearer token callers send, re-read when it changes (hostplane credentials init makes one) ("+EnvTokenFile+")")
	insecure := fs.Bool("insecure-no-auth", false, "serve the API on a TCP address without a token")
	level := fs.String("log-level", daemon.Env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error (HOSTPLANE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("%w: --log-level: %w", ErrUsage, err)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("%w: --dir: %w", ErrUsage, err)
	}
	if *tokenFile == "" && !*insecure && *listen != "" && !strings.HasPrefix(*listen, unixScheme) {
		return fmt.Errorf("%w: --listen %s is a TCP address: give --token-file (%s), or --insecure-no-auth to serve it to anyone who reaches it", ErrUsage, *listen, EnvTokenFile)
	}
	c, err := New(Config{Dir: abs, Listen: *listen, TokenFile: *tokenFile, Logger: observe.NewLogger(stderr, l).With("daemon", Name)})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
