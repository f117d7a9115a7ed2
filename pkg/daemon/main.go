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

// Main is the body of every daemon's main: register the base flags and the daemon's own
// (register adds them to fs and returns the constructor to call once they are parsed), then
// run until SIGINT or SIGTERM. It returns the process exit code.
func Main(name string, register func(fs *flag.FlagSet) func(base Base) (Runner, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	base := Flags(fs, name)
	build := register(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	r, err := build(*base)
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
