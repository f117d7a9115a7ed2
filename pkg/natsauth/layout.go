package natsauth

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/bus"
)

// LayOut connects to the server at url as the Bootstrap identity, with its seed in seedFile,
// over tls, and creates or updates the shared streams and the owners' buckets with replicas copies
// (bus.EnsureLayout): what a deployment does once before its daemons start. It waits for the
// server until ctx ends.
func LayOut(ctx context.Context, url, seedFile string, tls TLS, replicas int, log *slog.Logger) error {
	opts, err := ClientOptions(Bootstrap, seedFile, tls)
	if err != nil {
		return err
	}
	nc, err := bus.Connect(ctx, url, "hostplane-"+Bootstrap, log, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("nats layout: %w", err)
	}
	return bus.EnsureLayout(ctx, js, replicas)
}
