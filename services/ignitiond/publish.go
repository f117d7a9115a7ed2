package ignitiond

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hostplane/hostplane/pkg/events"
)

// markUnsent records that verb must be published about record key (replacing an older verb).
func (d *Daemon) markUnsent(key, verb string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unsent[key] = verb
}

// flush publishes record key's pending event, if any: subject key "<cluster>" for a server
// record, "<cluster>/<nodepool>" for a token record. A failed publish stays pending and the
// reconcile's error makes the controller retry it.
func (d *Daemon) flush(ctx context.Context, key string, log *slog.Logger) error {
	d.mu.Lock()
	verb, ok := d.unsent[key]
	d.mu.Unlock()
	if !ok {
		return nil
	}
	cluster, np, isPool := strings.Cut(key, ".")
	subject := cluster
	if isPool {
		subject = cluster + "/" + np
	}
	if _, err := d.publisher.Publish(ctx, cluster, events.ResourceIgnition, verb, subject, nil); err != nil {
		return fmt.Errorf("publish ignition.%s of %s: %w", verb, subject, err)
	}
	d.mu.Lock()
	if d.unsent[key] == verb {
		delete(d.unsent, key)
	}
	d.mu.Unlock()
	log.Info("published", "event", "ignition."+verb, "key", subject)
	return nil
}
