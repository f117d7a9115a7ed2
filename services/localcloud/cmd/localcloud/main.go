// Command localcloud runs the local platform's cloud: simulated worker machines that outlive
// infrad. Keep it this small: the cloud lives in the localcloud package.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hostplane/hostplane/services/localcloud"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := localcloud.Command(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case errors.Is(err, localcloud.ErrUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
