package bus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Connect dials url, retrying with backoff (200ms doubling to 5s) until it succeeds or ctx
// ends. The connection reconnects forever afterwards. name identifies the client (the
// daemon) in the server's monitoring.
func Connect(ctx context.Context, url, name string, log *slog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	base := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrl()) }),
	}
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(url, append(base, opts...)...)
		if err == nil {
			return nc, nil
		}
		log.Warn("nats connect failed; retrying", "url", url, "attempt", attempt, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to nats at %s: %w (last error: %v)", url, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}
