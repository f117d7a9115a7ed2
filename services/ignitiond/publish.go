package ignitiond

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/outbox"
)

// record stores the event verb about record key in the outbox: subject key "<cluster>" for a
// server record, "<cluster>/<nodepool>" for a token record ("<cluster>.<nodepool>"). It is
// called before the write the event is about (a failure leaves the record unwritten and the
// controller retries the reconcile); the entry is sent once the write succeeded, and
// published by the relay otherwise.
func (d *Daemon) record(ctx context.Context, key, verb string, log *slog.Logger) (outbox.Entry, error) {
	cluster, np, isPool := api.SplitPartKey(key)
	subject := cluster
	if isPool {
		subject = cluster + "/" + np
	}
	e, err := d.outbox.Record(ctx, cluster, events.ResourceIgnition, verb, subject, nil)
	if err != nil {
		return e, fmt.Errorf("record ignition.%s of %s: %w", verb, subject, err)
	}
	log.Debug("recorded", "event", "ignition."+verb, "key", subject)
	return e, nil
}
