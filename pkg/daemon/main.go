package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Runner is what a daemon's main runs.
type Runner interface {
	Run(ctx context.Context) error
}

// Config is what Main needs of a daemon's configuration C: a pointer to it, embedding Base.
type Config[C any] interface {
	*C
	base() *Base
}

func (b *Base) base() *Base { return b }

// Main is the body of every daemon's main: register the base flags and the daemon's own
// (register adds them to fs and returns the configuration they fill), parse them, build the
// daemon with newDaemon and run it until SIGINT or SIGTERM. It returns the process exit code.
func Main[C any, P Config[C], R Runner](name string, register func(fs *flag.FlagSet) P, newDaemon func(C) (R, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	base := Flags(fs, name)
	cfg := register(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	*cfg.base() = *base
	r, err := newDaemon(*cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}
