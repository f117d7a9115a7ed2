// Package lb is infrad's TCP load balancer: one listener per cluster endpoint in front of the
// cluster's kube-apiserver replicas.
//
// A LoadBalancer forwards bytes without looking at them (TLS passes through), picks backends
// round-robin, skips a backend whose dial fails (so a killed replica fails no client) and
// probes every backend each health interval to know which to send new connections to. The
// probe is GET /readyz over HTTPS, as a cloud load balancer in front of kube-apiservers does:
// a replica being shut down fails /readyz at once and keeps serving for its
// --shutdown-delay-duration, so it is drained before it stops listening. SetDraining takes
// replicas out before they are stopped.
//
// A balancer with a Config.Wake hook can hold a hibernated cluster's endpoint (SetAsleep):
// the first connection asks for a wake and every connection is held until an apiserver is
// ready (docs/hibernation.md). LastAccept is the activity spec.hibernation.idleAfter measures.
//
// Config.InternalAddr gives the balancer a second listener over the same backends, for the
// daemons' own traffic to a cluster with several apiservers: a connection there is never
// held, never wakes the cluster and is not activity. While the cluster sleeps that listener
// is closed, so a connection is refused at once and the daemons fail fast; it listens again
// on the same address when the cluster wakes. Refused, not accepted and closed: client-go
// retries a GET whose connection ends in EOF or a reset (ten times, a second apart), but
// not one whose dial is refused.
package lb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what one load balancer serves.
type Config struct {
	// Cluster names the balancer in metrics and logs.
	Cluster string
	// Addr is the address to listen on ("host:port"; port 0 picks one, see Addr).
	Addr string
	// InternalAddr, when set, is a second address to listen on for the daemons (see the
	// package documentation; port 0 picks one, see InternalAddr).
	InternalAddr string
	// Backends are the kube-apiserver replicas ("host:port"), at least one.
	Backends []string
	// HealthInterval is how often every backend's /readyz is probed.
	HealthInterval time.Duration
	// Metrics counts connections and dial failures (NewMetrics).
	Metrics *Metrics
	// Log is enriched with the cluster and the listening address.
	Log *slog.Logger
	// Wake, when set, makes the balancer wake on connect: while it is asleep (SetAsleep) a new
	// connection calls Wake (once per sleep) and is held until an apiserver is ready. Nil:
	// the balancer never holds a connection.
	Wake func() error
	// Now is the clock LastAccept reads; nil records no accepts.
	Now func() time.Time
}

// LoadBalancer is a TCP load balancer in front of one cluster's kube-apiserver replicas (see
// the package documentation). Start it with Start, stop it with Close.
type LoadBalancer struct {
	cluster  string
	addr     string
	internal string // Config.InternalAddr
	backends []string
	healthy  []atomic.Bool
	draining []atomic.Bool // set by componentd before it stops a replica: no new connections
	next     atomic.Uint64
	interval time.Duration
	dialTO   time.Duration
	probe    func(ctx context.Context, addr string) error
	// closeProbe closes the probe's kept connections (at Close).
	closeProbe func()
	metrics    *Metrics
	log        *slog.Logger

	// Wake on connect (a single apiserver's balancer; nil wake: never). While asleep, a new
	// connection asks for a wake (once per sleep) and is held until the apiserver is ready.
	wake      func() error
	sleepMu   sync.Mutex // serialises SetAsleep, so the internal listener follows the last call
	asleep    atomic.Bool
	wakeAsked atomic.Bool
	// now and lastAccept record when a client last connected (unix nanoseconds on the
	// daemon's clock): the activity spec.hibernation.idleAfter measures.
	now        func() time.Time
	lastAccept atomic.Int64

	ln           net.Listener
	internalAddr net.Addr // where the internal listener listens (kept while it is closed); nil without Config.InternalAddr
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// internalLn is the internal listener while it is open: nil while the cluster sleeps
	// (connections are refused) and without Config.InternalAddr. reopening is set while a
	// goroutine retries a listen that failed.
	internalLn net.Listener
	reopening  bool
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*LoadBalancer, error) {
	if len(cfg.Backends) == 0 {
		return nil, ErrNoBackends
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	var internalLn net.Listener
	if cfg.InternalAddr != "" {
		if internalLn, err = net.Listen("tcp", cfg.InternalAddr); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("internal listener: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	backends, interval := cfg.Backends, cfg.HealthInterval
	probe, closeProbe := readyzProbe(max(interval, time.Second))
	lb := &LoadBalancer{
		probe:      probe,
		closeProbe: closeProbe,
		cluster:    cfg.Cluster,
		addr:       cfg.Addr,
		internal:   cfg.InternalAddr,
		backends:   slices.Clone(backends),
		healthy:    make([]atomic.Bool, len(backends)),
		draining:   make([]atomic.Bool, len(backends)),
		interval:   interval,
		dialTO:     max(interval, time.Second),
		metrics:    cfg.Metrics,
		log:        cfg.Log.With("cluster", cfg.Cluster, "lb", cfg.Addr),
		wake:       cfg.Wake,
		now:        cfg.Now,
		ln:         ln,
		internalLn: internalLn,
		ctx:        ctx,
		cancel:     cancel,
		conns:      map[net.Conn]struct{}{},
	}
	if internalLn != nil {
		// Port 0 resolved: the listener reopens on this very address after a sleep.
		lb.internalAddr = internalLn.Addr()
	}
	// Optimistic until the first check: a failed dial falls through to the next backend anyway.
	for i := range lb.healthy {
		lb.healthy[i].Store(true)
	}
	cfg.Metrics.export(cfg.Cluster, backends)
	lb.wg.Add(2)
	go func() { defer lb.wg.Done(); lb.serve(ctx, ln, false) }()
	go func() { defer lb.wg.Done(); lb.checkHealth(ctx) }()
	if internalLn != nil {
		lb.wg.Go(func() { lb.serve(ctx, internalLn, true) })
	}
	lb.log.Info("load balancer listening", "backends", backends, "internal", cfg.InternalAddr)
	return lb, nil
}

// Matches reports whether the load balancer already serves addr (and internalAddr, "" for
// none) in front of backends.
func (lb *LoadBalancer) Matches(addr, internalAddr string, backends []string) bool {
	return lb.addr == addr && lb.internal == internalAddr && slices.Equal(lb.backends, backends)
}

// Close stops listening, closes every forwarded connection and waits for the goroutines.
func (lb *LoadBalancer) Close() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return nil
	}
	lb.closed = true
	for c := range lb.conns {
		_ = c.Close()
	}
	internalLn := lb.internalLn
	lb.internalLn = nil
	lb.mu.Unlock()
	lb.cancel()
	err := lb.ln.Close()
	if internalLn != nil {
		err = errors.Join(err, internalLn.Close())
	}
	lb.wg.Wait()
	lb.closeProbe()
	lb.log.Info("load balancer closed")
	return err
}

// serve accepts the connections of ln, the public listener or (internal) the daemons' one.
func (lb *LoadBalancer) serve(ctx context.Context, ln net.Listener, internal bool) {
	for {
		c, err := ln.Accept()
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
		if lb.now != nil && !internal {
			lb.lastAccept.Store(lb.now().UnixNano())
		}
		lb.wg.Go(func() {
			defer lb.untrack(c)
			lb.forward(ctx, c, internal)
		})
	}
}

// Wakes reports whether the balancer wakes its cluster on connect (Config.Wake).
func (lb *LoadBalancer) Wakes() bool { return lb.wake != nil }

// LastAccept is when the balancer last accepted a client connection on Config.Now's clock
// (zero: none yet, or no clock). A connection is what counts: requests on a connection kept
// open (a kubelet's heartbeats) do not.
func (lb *LoadBalancer) LastAccept() time.Time {
	if n := lb.lastAccept.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return time.Time{}
}

// Addr is the address the balancer listens on.
func (lb *LoadBalancer) Addr() net.Addr { return lb.ln.Addr() }

// InternalAddr is the address of the internal listener, also while it is closed for a
// sleeping cluster (nil without Config.InternalAddr).
func (lb *LoadBalancer) InternalAddr() net.Addr { return lb.internalAddr }

// closeInternal closes the internal listener (the cluster sleeps): new connections to it are
// refused by the kernel, at once.
func (lb *LoadBalancer) closeInternal() {
	lb.mu.Lock()
	ln := lb.internalLn
	lb.internalLn = nil
	lb.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
		lb.log.Info("cluster hibernates: internal listener closed, its connections are refused", "internal", lb.internalAddr.String())
	}
}

// internalReopenInterval is the pause between two attempts to listen again on the internal
// address after a failed one (its port briefly held by another socket).
const internalReopenInterval = time.Second

// openInternal listens on the internal address again (the cluster wakes), unless it already
// listens, the balancer is closed or the cluster went back to sleep. A failed listen is
// retried every internalReopenInterval by one goroutine until it succeeds or one of those
// holds.
func (lb *LoadBalancer) openInternal() {
	if lb.internalAddr == nil {
		return
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed || lb.internalLn != nil || lb.reopening {
		return
	}
	if lb.listenInternalLocked() == nil {
		return
	}
	lb.reopening = true
	lb.wg.Go(func() {
		t := time.NewTicker(internalReopenInterval)
		defer t.Stop()
		for {
			select {
			case <-lb.ctx.Done():
				return
			case <-t.C:
			}
			lb.mu.Lock()
			if lb.closed || lb.internalLn != nil || lb.asleep.Load() || lb.listenInternalLocked() == nil {
				lb.reopening = false
				lb.mu.Unlock()
				return
			}
			lb.mu.Unlock()
		}
	})
}

// listenInternalLocked listens on the internal address and serves it; lb.mu is held.
func (lb *LoadBalancer) listenInternalLocked() error {
	ln, err := net.Listen("tcp", lb.internalAddr.String())
	if err != nil {
		lb.log.Warn("internal listener: cannot listen again; retrying", "internal", lb.internalAddr.String(), "err", err)
		return err
	}
	lb.internalLn = ln
	lb.wg.Go(func() { lb.serve(lb.ctx, ln, true) })
	lb.log.Info("internal listener open again", "internal", lb.internalAddr.String())
	return nil
}

// track records c so Close can end it; false once closed.
func (lb *LoadBalancer) track(c net.Conn) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return false
	}
	lb.conns[c] = struct{}{}
	return true
}

func (lb *LoadBalancer) untrack(c net.Conn) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	delete(lb.conns, c)
}

// WakeHold bounds how long a connection to a hibernated (or waking) cluster is held before
// it is forwarded.
const WakeHold = 60 * time.Second

// SetAsleep puts the balancer in or out of wake-on-connect mode. Waking marks every backend
// unready until its probe passes, so held connections go to a ready apiserver only. The
// internal listener is closed while asleep and listens again on waking.
func (lb *LoadBalancer) SetAsleep(asleep bool) {
	lb.sleepMu.Lock()
	defer lb.sleepMu.Unlock()
	was := lb.asleep.Swap(asleep)
	switch {
	case asleep && !was:
		lb.wakeAsked.Store(false)
		lb.closeInternal()
		lb.log.Info("cluster hibernates: the endpoint listens and wakes it on the first connection")
	case !asleep && was:
		for i := range lb.healthy {
			lb.healthy[i].Store(false)
		}
		lb.openInternal()
		lb.log.Info("cluster wakes: connections are held until its apiserver is ready")
	}
}

// awaitBackend holds a new connection of a wake-on-connect balancer while the cluster
// sleeps or no apiserver is ready yet: the first one asks for a wake, later ones join it. It
// reports false when WakeHold passed (or the balancer closed) first.
func (lb *LoadBalancer) awaitBackend(ctx context.Context) bool {
	if lb.wake == nil {
		return true
	}
	ready := func() bool {
		if lb.asleep.Load() {
			return false
		}
		for i := range lb.healthy {
			if lb.healthy[i].Load() {
				return true
			}
		}
		return false
	}
	if ready() {
		return true
	}
	// Only a connection that arrives while the cluster sleeps wakes it; one that arrived
	// while it was going to sleep (a kubelet, kube-controller-manager) only waits.
	wakes := lb.asleep.Load()
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, WakeHold)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		if wakes && lb.asleep.Load() && lb.wakeAsked.CompareAndSwap(false, true) {
			lb.log.Info("a connection reached the hibernated cluster: waking it")
			if err := lb.wake(); err != nil {
				lb.wakeAsked.Store(false) // the next look asks again
				lb.log.Warn("wake request failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	lb.log.Info("held connection forwarded: an apiserver is ready", "held", time.Since(began).Round(time.Millisecond).String(), "woke", wakes)
	return true
}

// forward dials a backend for client and copies bytes both ways until both sides are done.
// A connection of the internal listener is never held: one accepted just as the cluster went
// to sleep (before the listener closed) is closed at once, any other goes to a backend as it
// is.
func (lb *LoadBalancer) forward(ctx context.Context, client net.Conn, internal bool) {
	defer client.Close()
	if internal {
		if lb.asleep.Load() {
			lb.log.Debug("the cluster hibernates: internal connection closed", "client", client.RemoteAddr().String())
			return
		}
	} else if began := time.Now(); !lb.awaitBackend(ctx) {
		held := time.Since(began).Round(time.Millisecond).String()
		if ctx.Err() != nil {
			// The balancer closed (the cluster was deleted or its balancer replaced): the
			// client dials again and reaches whatever serves the endpoint now.
			lb.log.Info("held connection closed: the balancer closed", "client", client.RemoteAddr().String(), "held", held)
			return
		}
		lb.log.Warn("held connection closed: no apiserver became ready within WakeHold", "client", client.RemoteAddr().String(), "held", held)
		return
	}
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
	lb.metrics.connections.WithLabelValues(lb.cluster, addr).Inc()

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
func (lb *LoadBalancer) dial(ctx context.Context) (net.Conn, string) {
	n := len(lb.backends)
	start := int(lb.next.Add(1) - 1)
	d := net.Dialer{Timeout: lb.dialTO}
	// Healthy backends first, then unhealthy ones (a probe may lag); draining ones only when
	// nothing else accepts.
	for _, pass := range []struct{ healthy, draining bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		for i := range n {
			j := (start + i) % n
			if lb.healthy[j].Load() != pass.healthy || lb.draining[j].Load() != pass.draining {
				continue
			}
			addr := lb.backends[j]
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				lb.healthy[j].Store(false)
				lb.metrics.dialFailures.WithLabelValues(lb.cluster, addr).Inc()
				lb.log.Debug("backend dial failed; trying the next", "backend", addr, "err", err)
				continue
			}
			// A dial that succeeds says nothing about readiness (a draining replica still
			// accepts): only the probe marks a backend healthy again.
			return c, addr
		}
	}
	return nil, ""
}

// SetDraining marks which backends (by index in Config.Backends) are draining; the others are
// not. A draining backend gets a new connection only when no other accepts it.
func (lb *LoadBalancer) SetDraining(draining map[int]bool) {
	for i := range lb.draining {
		if was := lb.draining[i].Swap(draining[i]); was != draining[i] {
			lb.log.Info("backend draining changed", "backend", lb.backends[i], "draining", draining[i])
		}
	}
}

// checkHealth probes every backend each interval and records whether it is ready. While no
// backend is healthy (a control plane starting or waking, its clients' connections held by
// awaitBackend) it probes every unhealthyInterval instead, so a held connection goes through
// soon after an apiserver is ready rather than up to an interval later.
func (lb *LoadBalancer) checkHealth(ctx context.Context) {
	t := time.NewTimer(lb.nextProbe())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, addr := range lb.backends {
			err := lb.probe(ctx, addr)
			ok := err == nil
			if was := lb.healthy[i].Swap(ok); was != ok && ctx.Err() == nil {
				lb.log.Info("backend health changed", "backend", addr, "healthy", ok)
			}
		}
		t.Reset(lb.nextProbe())
	}
}

// unhealthyInterval is how often backends are probed while none is healthy.
const unhealthyInterval = 100 * time.Millisecond

// nextProbe is the pause before the next round of probes.
func (lb *LoadBalancer) nextProbe() time.Duration {
	for i := range lb.healthy {
		if lb.healthy[i].Load() {
			return lb.interval
		}
	}
	return min(lb.interval, unhealthyInterval)
}

// readyzPath leaves out kube-apiserver's etcd checks: etcd is shared by every replica, so its
// hiccup (a member restarting, a leader election) would mark all backends unready at once and
// leave the balancer choosing blindly, possibly a replica that is still starting. What the
// balancer needs to know is whether this replica serves (and is not shutting down).
const readyzPath = "/readyz?exclude=etcd&exclude=etcd-readiness"

// readyzProbe returns a probe that wants 200 from GET https://<addr>/readyz (readyzPath), and a
// func that closes its idle connections. The probe does not verify the serving certificate: it
// asks a backend it was configured with whether it is ready, and carries no credentials or data
// (anonymous /readyz is allowed by default RBAC).
//
// It keeps its connection to each backend open between probes: a new TLS handshake twice a
// second was the largest part of an idle kube-apiserver's CPU (BENCHMARKS.md, lean components).
// A backend that stops or restarts breaks that connection, and the next probe dials anew; one
// shutting down answers /readyz on it with an error, as on a new one.
func readyzProbe(timeout time.Duration) (probe func(ctx context.Context, addr string) error, closeIdle func()) {
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe only, see above
		MaxIdleConnsPerHost: 1,
		// A backend no longer probed (the balancer replaced) must not keep a connection.
		IdleConnTimeout: 4 * timeout,
	}
	client := &http.Client{Timeout: timeout, Transport: transport}
	return func(ctx context.Context, addr string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+readyzPath, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%w: /readyz answered %d", ErrBackendNotReady, resp.StatusCode)
		}
		return nil
	}, transport.CloseIdleConnections
}
