// Command hostplane is Hostplane's command line: kubectl-like commands over the /v1 API
// (internal/cli) and `hostplane dev`, which runs everything in one process (what `make run`
// runs).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
