package infrad

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadBalancer is a TCP load balancer in front of one cluster's kube-apiserver replicas. It
// forwards bytes without looking at them (TLS passes through), picks backends round-robin,
// skips a backend whose dial fails (so a killed replica fails no client) and dials every
// backend each health interval to know which to try first.
type loadBalancer struct {
	cluster  string
	addr     string
	backends []string
	healthy  []atomic.Bool
	next     atomic.Uint64
	interval time.Duration
	dialTO   time.Duration
	metrics  *metrics
	log      *slog.Logger

	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// startLoadBalancer listens on addr and serves until Close.
func startLoadBalancer(cluster, addr string, backends []string, interval time.Duration, m *metrics, log *slog.Logger) (*loadBalancer, error) {
	if len(backends) == 0 {
		return nil, ErrNoBackends
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	lb := &loadBalancer{
		cluster:  cluster,
		addr:     addr,
		backends: slices.Clone(backends),
		healthy:  make([]atomic.Bool, len(backends)),
		interval: interval,
		dialTO:   max(interval, time.Second),
		metrics:  m,
		log:      log.With("cluster", cluster, "lb", addr),
		ln:       ln,
		cancel:   cancel,
		conns:    map[net.Conn]struct{}{},
	}
	// Optimistic until the first check: a failed dial falls through to the next backend anyway.
	for i := range lb.healthy {
		lb.healthy[i].Store(true)
	}
	lb.wg.Add(2)
	go func() { defer lb.wg.Done(); lb.serve(ctx) }()
	go func() { defer lb.wg.Done(); lb.checkHealth(ctx) }()
	lb.log.Info("load balancer listening", "backends", backends)
	return lb, nil
}

// matches reports whether the load balancer already serves addr in front of backends.
func (lb *loadBalancer) matches(addr string, backends []string) bool {
	return lb.addr == addr && slices.Equal(lb.backends, backends)
}

// Close stops listening, closes every forwarded connection and waits for the goroutines.
func (lb *loadBalancer) Close() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return nil
	}
	lb.closed = true
	for c := range lb.conns {
		_ = c.Close()
	}
	lb.mu.Unlock()
	lb.cancel()
	err := lb.ln.Close()
	lb.wg.Wait()
	lb.log.Info("load balancer closed")
	return err
}

func (lb *loadBalancer) serve(ctx context.Context) {
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			lb.log.Warn("accept", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !lb.track(c) {
			_ = c.Close()
			return
		}
		lb.wg.Add(1)
		go func() {
			defer lb.wg.Done()
			defer lb.untrack(c)
			lb.forward(ctx, c)
		}()
	}
}

// track records c so Close can end it; false once closed.
func (lb *loadBalancer) track(c net.Conn) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return false
	}
	lb.conns[c] = struct{}{}
	return true
}

func (lb *loadBalancer) untrack(c net.Conn) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	delete(lb.conns, c)
}

// forward dials a backend for client and copies bytes both ways until both sides are done.
func (lb *loadBalancer) forward(ctx context.Context, client net.Conn) {
	defer client.Close()
	backend, addr := lb.dial(ctx)
	if backend == nil {
		lb.log.Warn("no backend accepted the connection", "client", client.RemoteAddr().String())
		return
	}
	if !lb.track(backend) {
		_ = backend.Close()
		return
	}
	defer lb.untrack(backend)
	defer backend.Close()
	lb.metrics.lbConnections.WithLabelValues(lb.cluster, addr).Inc()

	errc := make(chan error, 2)
	go func() { errc <- pipe(backend, client) }()
	go func() { errc <- pipe(client, backend) }()
	if err := <-errc; err != nil {
		// One side broke (a killed replica resets its connections): end both.
		_ = client.Close()
		_ = backend.Close()
	}
	<-errc
}

// pipe copies src to dst and then half-closes dst, so the peer sees the end of the stream
// while the other direction keeps flowing.
func pipe(dst, src net.Conn) error {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	return err
}

// dial tries the backends round-robin, healthy ones first, and returns the first connection.
func (lb *loadBalancer) dial(ctx context.Context) (net.Conn, string) {
	n := len(lb.backends)
	start := int(lb.next.Add(1) - 1)
	d := net.Dialer{Timeout: lb.dialTO}
	for _, wantHealthy := range []bool{true, false} {
		for i := range n {
			j := (start + i) % n
			if lb.healthy[j].Load() != wantHealthy {
				continue
			}
			addr := lb.backends[j]
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				lb.healthy[j].Store(false)
				lb.metrics.lbDialFailures.WithLabelValues(lb.cluster, addr).Inc()
				lb.log.Debug("backend dial failed; trying the next", "backend", addr, "err", err)
				continue
			}
			lb.healthy[j].Store(true)
			return c, addr
		}
	}
	return nil, ""
}

// checkHealth dials every backend each interval and records whether it accepted.
func (lb *loadBalancer) checkHealth(ctx context.Context) {
	t := time.NewTicker(lb.interval)
	defer t.Stop()
	d := net.Dialer{Timeout: lb.dialTO}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, addr := range lb.backends {
			c, err := d.DialContext(ctx, "tcp", addr)
			ok := err == nil
			if ok {
				_ = c.Close()
			}
			if was := lb.healthy[i].Swap(ok); was != ok && ctx.Err() == nil {
				lb.log.Info("backend health changed", "backend", addr, "healthy", ok)
			}
		}
	}
}
