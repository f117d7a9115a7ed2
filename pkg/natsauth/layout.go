package natsauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/bus"
)

// EnsureLayout creates or updates everything on NATS no daemon may change itself: the shared
// streams and the owners' buckets (bus.EnsureLayout), and each daemon's outbox stream and, for
// an inbound owner, its dedup bucket (bus.OutboxStreamConfig, bus.DedupBucketConfig). The
// bootstrap identity runs it.
func EnsureLayout(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if err := bus.EnsureLayout(ctx, js, replicas); err != nil {
		return err
	}
	for _, d := range Daemons {
		if _, err := bus.EnsureStream(ctx, js, bus.OutboxStreamConfig(d.Name, replicas)); err != nil {
			return err
		}
		if d.Inbound {
			if _, err := bus.EnsureKeyValue(ctx, js, bus.DedupBucketConfig(d.Name, 0, replicas)); err != nil {
				return err
			}
		}
	}
	return nil
}

// layoutTry bounds one attempt at the layout.
const layoutTry = 15 * time.Second

// LayOut connects to the server at url as the Bootstrap identity, with its seed in seedFile,
// over tls, and creates or updates the shared streams and the owners' buckets with replicas copies
// (EnsureLayout): what a deployment does once before its daemons start. It waits for the
// server, and for a NATS cluster's JetStream to have the servers replicas needs (the servers
// of a cluster that starts at once elect JetStream's leader seconds after they accept
// clients), until ctx ends; it then returns the last error.
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
	var last error
	backoff := wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt}
	err = backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		// A request the cluster cannot answer yet may get no answer at all: bound each try.
		tctx, cancel := context.WithTimeout(ctx, layoutTry)
		defer cancel()
		if last = EnsureLayout(tctx, js, replicas); last != nil {
			log.Warn("streams and buckets not laid out yet; retrying", "err", last)
		}
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}
