package localcloud

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Environment variables of cmd/localcloud's flags.
const (
	EnvDir    = "HOSTPLANE_LOCALCLOUD_DIR"
	EnvListen = "HOSTPLANE_LOCALCLOUD_LISTEN"
)

// Command is cmd/localcloud: it parses args (--dir, --listen, --log-level, defaulting to
// HOSTPLANE_LOCALCLOUD_DIR, HOSTPLANE_LOCALCLOUD_LISTEN and HOSTPLANE_LOG_LEVEL) and runs a
// Cloud until ctx ends. Logs go to stderr as JSON.
func Command(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", daemon.Env(EnvDir, DefaultDir), "state directory of the machines ("+EnvDir+")")
	listen := fs.String("listen", daemon.Env(EnvListen, ""), "API address: unix:///abs/path.sock or 127.0.0.1:port (default unix://<dir>/"+DefaultSocketName+") ("+EnvListen+")")
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
	c, err := New(Config{Dir: abs, Listen: *listen, Logger: observe.NewLogger(stderr, l).With("daemon", Name)})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
