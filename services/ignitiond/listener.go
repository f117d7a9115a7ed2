package ignitiond

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// listener is one cluster's HTTPS Ignition server. Its certificate is read per handshake, so
// setCert swaps it for new connections without closing anything.
type listener struct {
	cluster string
	addr    string
	srv     *http.Server
	cert    atomic.Pointer[tls.Certificate]
	done    chan struct{} // closed when Serve returned
}

func (l *listener) setCert(c *tls.Certificate) { l.cert.Store(c) }

func (l *listener) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := l.cert.Load(); c != nil {
		return c, nil
	}
	return nil, ErrNoCertificate
}

// close stops the server: at once, or within ctx for in-flight requests when ctx is set.
func (l *listener) close(ctx context.Context) {
	if ctx != nil {
		if err := l.srv.Shutdown(ctx); err == nil {
			<-l.done
			return
		}
	}
	_ = l.srv.Close()
	<-l.done
}

// listeners are the open listeners by cluster. It is safe for concurrent use.
type listeners struct {
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	open    map[string]*listener
	stopped bool
}

func newListeners(log *slog.Logger, m *metrics) *listeners {
	return &listeners{log: log, metrics: m, open: map[string]*listener{}}
}

// ensure makes cluster's listener run on addr with cert, opening it (or re-opening it on a
// new address) with handler when needed. It reports whether it opened one.
func (ls *listeners) ensure(cluster, addr string, cert *tls.Certificate, handler http.Handler) (bool, error) {
	ls.mu.Lock()
	if ls.stopped {
		ls.mu.Unlock()
		return false, ErrStopping
	}
	old := ls.open[cluster]
	ls.mu.Unlock()
	if old != nil && old.addr == addr {
		old.setCert(cert)
		return false, nil
	}
	if old != nil {
		ls.close(cluster)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false, err
	}
	l := &listener{cluster: cluster, addr: addr, done: make(chan struct{})}
	l.setCert(cert)
	log := ls.log.With("cluster", cluster)
	l.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		// Failed handshakes (scanners, clients that do not trust root-ca) are not errors of ours.
		ErrorLog:  slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.getCertificate},
	}
	ls.mu.Lock()
	if ls.stopped || ls.open[cluster] != nil {
		ls.mu.Unlock()
		_ = ln.Close()
		if ls.stopped {
			return false, ErrStopping
		}
		return false, nil // another reconcile of the cluster won; the next one sets the cert
	}
	ls.open[cluster] = l
	ls.metrics.listeners.Set(float64(len(ls.open)))
	ls.mu.Unlock()
	go func() {
		defer close(l.done)
		if err := l.srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("ignition listener failed", "addr", addr, "err", err)
		}
	}()
	log.Info("ignition listener open", "addr", addr)
	return true, nil
}

// close stops cluster's listener, if it runs, and reports whether it did.
func (ls *listeners) close(cluster string) bool {
	ls.mu.Lock()
	l := ls.open[cluster]
	delete(ls.open, cluster)
	ls.metrics.listeners.Set(float64(len(ls.open)))
	ls.mu.Unlock()
	if l == nil {
		return false
	}
	l.close(nil)
	ls.log.Info("ignition listener closed", "cluster", cluster, "addr", l.addr)
	return true
}

// closeAll stops every listener (daemon shutdown), letting in-flight requests finish within
// ctx; no listener opens afterwards.
func (ls *listeners) closeAll(ctx context.Context) {
	ls.mu.Lock()
	ls.stopped = true
	open := ls.open
	ls.open = map[string]*listener{}
	ls.metrics.listeners.Set(0)
	ls.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range open {
		wg.Go(func() { l.close(sctx) })
	}
	wg.Wait()
}
