package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultShutdownTimeout is how long Start waits for requests in flight once its context ends.
const DefaultShutdownTimeout = 5 * time.Second

// Server serves one handler on one address until its context ends.
type Server struct {
	// TLSConfig, when set before Start, makes the server answer HTTPS only. It must carry a
	// certificate (Certificates or GetCertificate).
	TLSConfig *tls.Config
	// ShutdownTimeout bounds the graceful shutdown (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration

	addr    string
	handler http.Handler
	log     *slog.Logger

	started   atomic.Bool
	listening chan struct{} // closed once listening or failed to
	once      sync.Once
	bound     string // set before listening is closed
}

// NewServer returns a server for h on addr ("127.0.0.1:0" picks a free port). log receives
// the server's own errors; nil discards them.
func NewServer(addr string, h http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{addr: addr, handler: h, log: log, listening: make(chan struct{})}
}

// Start listens, serves until ctx ends, then shuts down gracefully: it stops accepting, waits
// up to ShutdownTimeout for requests in flight and closes what is left. It returns nil after a
// clean stop, and an error if it cannot listen, serving fails, or the shutdown ran out of time.
// A Server starts once.
func (s *Server) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrServerStarted
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		s.once.Do(func() { close(s.listening) })
		return fmt.Errorf("httpapi: listen on %s: %w", s.addr, err)
	}
	s.bound = ln.Addr().String()
	s.once.Do(func() { close(s.listening) })

	closing := make(chan struct{})
	srv := &http.Server{
		Handler: s.handler,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), closingKey{}, closing)
		},
		TLSConfig:         s.TLSConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() {
		if s.TLSConfig != nil {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	s.log.Info("http server listening", "addr", s.bound, "tls", s.TLSConfig != nil)

	select {
	case err := <-served: // Serve only returns early on failure
		return fmt.Errorf("httpapi: serve on %s: %w", s.bound, err)
	case <-ctx.Done():
	}

	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	close(closing) // long-lived answers (event streams) end now; the rest drain
	shutdownErr := srv.Shutdown(sctx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("httpapi: serve on %s: %w", s.bound, serveErr)
	}
	if shutdownErr != nil {
		_ = srv.Close()
		return fmt.Errorf("httpapi: shutdown of %s: %w", s.bound, shutdownErr)
	}
	s.log.Info("http server stopped", "addr", s.bound)
	return nil
}

type closingKey struct{}

// Closing returns a channel that is closed when the Server that accepted ctx's request begins
// to shut down, or nil (never ready) outside a Server. Handlers of long-lived answers (Server-
// Sent Events, log follows) end when it closes, so a shutdown does not wait for them.
func Closing(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(closingKey{}).(chan struct{})
	return ch
}

// Addr returns the address the server listens on ("127.0.0.1:41234"), blocking until Start
// is listening. It returns "" if Start failed to listen; it blocks forever if Start is never
// called.
func (s *Server) Addr() string {
	<-s.listening
	return s.bound
}
