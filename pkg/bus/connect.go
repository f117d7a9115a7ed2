package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Connect dials url, retrying with backoff (200ms doubling to 5s) until it succeeds, ctx
// ends, the server refuses the credentials in opts (pkg/natsauth.ClientOptions) three times in
// a row (a reloading server may refuse once) or its TLS
// certificate is not trusted (a CA that did not sign it): retrying will not change either. The
// connection reconnects forever afterwards. name identifies the client (the daemon) in the
// server's monitoring.
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
	var (
		nc      *nats.Conn
		lastErr error
		attempt int
		refused int // authorization refusals in a row
	)
	// Until calls the condition at once, then after each delay until it holds or ctx ends.
	err := connectBackoff.DelayFunc().Until(ctx, true, true, func(context.Context) (bool, error) {
		attempt++
		c, err := nats.Connect(url, append(base, opts...)...)
		if errors.Is(err, nats.ErrAuthorization) {
			// A server applying a configuration reload (new users, a new certificate) may
			// refuse a connection it accepts a moment later; a third refusal in a row is the
			// credentials, which retrying will not change.
			if refused++; refused >= authRefusals {
				return false, fmt.Errorf("%w: the server refused the credentials", err)
			}
			lastErr = err
			return false, nil
		}
		refused = 0
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			return false, fmt.Errorf("%w: the server's certificate is not trusted", err)
		}
		if err != nil {
			lastErr = err
			log.Warn("nats connect failed; retrying", "url", url, "attempt", attempt, "err", err)
			return false, nil
		}
		nc = c
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w (last error: %v)", url, err, lastErr)
	}
	return nc, nil
}

// authRefusals is how many authorization refusals in a row make Connect give up.
const authRefusals = 3

// connectBackoff is Connect's delay between attempts: 200ms doubling to 5s, then 5s.
var connectBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: math.MaxInt}
