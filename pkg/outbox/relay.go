package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Start runs the relay until ctx ends, then returns nil: it publishes the outbox's entries in
// the order they were recorded, each removed once the events stream stored it. Entries left
// by an earlier process come first. A failure to consume (the consumer or stream gone for a
// while) is logged and consuming starts again with backoff.
func (o *Outbox) Start(ctx context.Context) error {
	err := o.cfg.Backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		if err := o.consume(ctx); err != nil && ctx.Err() == nil {
			o.log.WarnContext(ctx, "outbox relay stopped consuming; starting again", "err", err)
		}
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// consume relays entries until ctx ends (nil) or the consumer fails.
func (o *Outbox) consume(ctx context.Context) error {
	c, err := o.consumer(ctx)
	if err != nil {
		return err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		return fmt.Errorf("consume %s: %w", o.stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("consume %s: %w", o.stream, err)
		}
		o.relay(ctx, msg)
	}
}

// relay publishes one entry, retrying until it succeeds or ctx ends, then acknowledges it
// (which removes it from the work queue).
func (o *Outbox) relay(ctx context.Context, msg jetstream.Msg) {
	var left uint64
	meta, err := msg.Metadata()
	if err == nil {
		left = meta.NumPending
		o.m.pending.Set(float64(left + 1))
		if !o.settle(ctx, meta) {
			return // ctx ended: the entry stays for the next relay
		}
	}
	subject, ev, err := decode(msg)
	if err != nil {
		o.log.ErrorContext(ctx, "outbox entry dropped", "err", err)
		if err := msg.Term(); err != nil {
			o.log.WarnContext(ctx, "terminate outbox entry", "err", err)
		}
		return
	}
	// The publish span is a child of the span that recorded the entry; an entry recorded
	// outside any trace is published without a span, as a direct publish would have been.
	traced := observe.ExtractNATS(ctx, msg.Headers())
	tp := o.cfg.TracerProvider
	if !trace.SpanContextFromContext(traced).IsValid() {
		tp = nil
	}
	attempt := 0
	err = o.cfg.Backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		attempt++
		_, err := bus.PublishEventTraced(traced, o.js, tp, subject, ev)
		if err == nil {
			return true, nil
		}
		o.m.failures.Inc()
		o.log.WarnContext(ctx, "publish from the outbox failed; retrying", "event", ev.Type, "key", ev.Subject,
			"id", ev.ID, "attempt", attempt, "err", err)
		if err := msg.InProgress(); err != nil {
			o.log.DebugContext(ctx, "renew the hold on the outbox entry", "err", err)
		}
		o.refreshPending(ctx)
		return false, nil
	})
	if err != nil {
		return // ctx ended: the entry stays for the next relay
	}
	if o.afterPublish != nil {
		o.afterPublish()
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// The entry comes back after AckWait; the events stream drops the second copy.
		o.log.WarnContext(ctx, "acknowledge the published outbox entry", "id", ev.ID, "err", err)
		return
	}
	o.m.published.Inc()
	o.m.pending.Set(float64(left))
}

// settle waits until a fresh entry is Settle old, so that its writer has stored the change
// (and sent the event itself) before the relay publishes; never longer than Settle, whatever
// the clocks say. An entry delivered before (its relay died) needs no wait. It reports false
// if ctx ended first.
func (o *Outbox) settle(ctx context.Context, meta *jetstream.MsgMetadata) bool {
	if meta.NumDelivered > 1 {
		return true
	}
	d := min(time.Until(meta.Timestamp.Add(o.cfg.Settle)), o.cfg.Settle)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refreshPending reads how many entries the outbox holds, so the gauge shows an outbox
// growing behind an entry that does not go out.
func (o *Outbox) refreshPending(ctx context.Context) {
	s, err := o.js.Stream(ctx, o.stream)
	if err != nil {
		return
	}
	if info, err := s.Info(ctx); err == nil {
		o.m.pending.Set(float64(info.State.Msgs))
	}
}

// decode reads an entry written by Record.
func decode(msg jetstream.Msg) (string, events.Event, error) {
	subject := msg.Headers().Get(HeaderSubject)
	if _, err := events.ParseSubject(subject); err != nil {
		return "", events.Event{}, fmt.Errorf("%w: %v", ErrNotAnEvent, err)
	}
	ev, err := events.Decode(msg.Data())
	if err != nil {
		return "", events.Event{}, errors.Join(ErrNotAnEvent, err)
	}
	return subject, ev, nil
}
