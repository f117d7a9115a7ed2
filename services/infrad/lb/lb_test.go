package lb

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tlsBackend is an HTTPS server answering name, like one kube-apiserver replica.
func tlsBackend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoadBalancer_PassesTLSThroughAndSkipsABackendWhoseDialFails(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a, b := tlsBackend(t, "a"), tlsBackend(t, "b")
	backends := []string{a.Listener.Addr().String(), b.Listener.Addr().String()}
	// A health interval longer than the test: only the dial fallback can save requests to a
	// stopped backend.
	lb, err := Start(Config{Cluster: "c1", Addr: "127.0.0.1:0", Backends: backends, HealthInterval: time.Hour, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })

	// Both httptest servers use the same certificate, so a's client trusts b too.
	tr := a.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "https://" + lb.Addr().String() + "/"
	seen := map[string]int{}
	for i := range 10 {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		seen[string(body)]++
	}
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Errorf("round-robin answers %v, want 5 each", seen)
	}

	a.Close()
	for i := range 10 {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("request %d after stopping a: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(body) != "b" {
			t.Fatalf("request %d after stopping a answered %q", i, body)
		}
	}
	if n := testutil.ToFloat64(m.dialFailures.WithLabelValues("c1", backends[0])); n < 1 {
		t.Errorf("dial failures of the stopped backend = %v, want at least 1", n)
	}
	if n := testutil.ToFloat64(m.connections.WithLabelValues("c1", backends[1])); n != 15 {
		t.Errorf("connections to b = %v, want 15", n)
	}

	addr := lb.Addr().String()
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("closed load balancer still accepts on %s", addr)
	}
}

// readyzBackend is an HTTPS server whose /readyz answers 200 until ready is set to false,
// like a kube-apiserver that received SIGTERM; every other path answers name.
func readyzBackend(t *testing.T, name string, ready *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !ready.Load() {
			http.Error(w, "[-]shutdown failed", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoadBalancer_SendsNothingNewToADrainingOrUnreadyBackend(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var aReady, bReady atomic.Bool
	aReady.Store(true)
	bReady.Store(true)
	a, b := readyzBackend(t, "a", &aReady), readyzBackend(t, "b", &bReady)
	backends := []string{a.Listener.Addr().String(), b.Listener.Addr().String()}
	lb, err := Start(Config{Cluster: "c1", Addr: "127.0.0.1:0", Backends: backends, HealthInterval: 50 * time.Millisecond, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	tr := a.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "https://" + lb.Addr().String() + "/"
	answers := func(n int) map[string]int {
		seen := map[string]int{}
		for range n {
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			seen[string(body)]++
		}
		return seen
	}

	// componentd marks a draining before stopping it: every new connection goes to b.
	lb.SetDraining(map[int]bool{0: true})
	if seen := answers(6); seen["a"] != 0 {
		t.Fatalf("a draining backend got %d of 6 new connections", seen["a"])
	}
	lb.SetDraining(nil)

	// b fails /readyz (shutting down): once a probe saw it, only a gets new connections.
	bReady.Store(false)
	waitFor(t, func() bool { return !lb.healthy[1].Load() }, "probe never saw b unready")
	if seen := answers(6); seen["b"] != 0 {
		t.Fatalf("an unready backend got %d of 6 new connections", seen["b"])
	}
	bReady.Store(true)
	waitFor(t, func() bool { return lb.healthy[1].Load() }, "probe never saw b ready again")
	if seen := answers(6); seen["b"] != 3 {
		t.Fatalf("b ready again got %d of 6 connections, want 3", seen["b"])
	}
}

// The probe keeps its connection to a backend between probes: a backend that stops must still
// be seen down, and seen ready again once a new one serves on its address (a replica restarted
// on its port).
func TestLoadBalancer_BackendRestartedOnItsAddress_IsSeenDownThenReadyAgain(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	ready.Store(true)
	first := readyzBackend(t, "first", &ready)
	addr := first.Listener.Addr().String()
	lb, err := Start(Config{Cluster: "c1", Addr: "127.0.0.1:0", Backends: []string{addr}, HealthInterval: 50 * time.Millisecond, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	ready.Store(false)
	waitFor(t, func() bool { return !lb.healthy[0].Load() }, "probe never saw the backend unready")
	ready.Store(true)
	waitFor(t, func() bool { return lb.healthy[0].Load() }, "probe never saw the backend ready")

	first.Close() // closes the probe's kept connection too
	waitFor(t, func() bool { return !lb.healthy[0].Load() }, "probe never saw the stopped backend down")
	serveTLS(t, addr, "second")
	waitFor(t, func() bool { return lb.healthy[0].Load() }, "probe never saw the backend restarted on its address")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} //nolint:gosec // test backend
	resp, err := client.Get("https://" + lb.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "second" {
		t.Fatalf("through the balancer: %q, want the restarted backend's %q", body, "second")
	}
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A sleeping single-apiserver balancer holds every new connection, asks for one wake however
// many connections arrive, and forwards them once the apiserver answers its probe.
// balancerOfAFreePort starts a wake-on-connect balancer probing every interval in front of
// one backend address with nothing listening yet (an apiserver not started), and returns both.
func balancerOfAFreePort(t *testing.T, interval time.Duration, wake func() error) (*LoadBalancer, string) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	lb, err := Start(Config{Cluster: "c1", Addr: "127.0.0.1:0", Backends: []string{addr}, HealthInterval: interval, Metrics: m, Log: slog.New(slog.DiscardHandler), Wake: wake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	return lb, addr
}

// serveTLS starts an HTTPS server answering body on addr.
func serveTLS(t *testing.T, addr, body string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, body)
	}))
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
}

// getInto GETs url and sends the body, or the error, to out.
func getInto(client *http.Client, url string, out chan<- string) {
	resp, err := client.Get(url)
	if err != nil {
		out <- err.Error()
		return
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	out <- string(body)
}

func TestLoadBalancer_AsleepHoldsConnectionsWakesOnceAndForwardsWhenReady(t *testing.T) {
	// The apiserver's port, with nothing listening yet: the cluster hibernates.
	var (
		lb    *LoadBalancer
		addr  string
		wakes atomic.Int32
	)
	lb, addr = balancerOfAFreePort(t, 50*time.Millisecond, func() error {
		wakes.Add(1)
		// What clusterd, componentd and infrad do: the spec says awake, the apiserver starts.
		go func() {
			lb.SetAsleep(false)
			serveTLS(t, addr, "awake")
		}()
		return nil
	})
	lb.SetAsleep(true)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // a test server
	url := "https://" + lb.Addr().String() + "/api/v1/namespaces/default/configmaps/x"
	answers := make(chan string, 3)
	for range 3 {
		go getInto(client, url, answers)
	}
	for range 3 {
		if got := <-answers; got != "awake" {
			t.Errorf("a held request answered %q, want the woken apiserver's answer", got)
		}
	}
	if n := wakes.Load(); n != 1 {
		t.Errorf("wake asked %d times for 3 connections, want once", n)
	}
}

// TestLoadBalancer_HeldConnectionGoesThroughOnceAnAPIServerIsReady_WhateverTheHealthInterval:
// while no backend is ready (a cluster starting or waking), the balancer probes often, so a
// connection it holds reaches kube-apiserver soon after it is ready rather than after the
// next regular probe (an hour here, so only the frequent probing can let it through before
// the hold ends).
func TestLoadBalancer_HeldConnectionGoesThroughOnceAnAPIServerIsReady_WhateverTheHealthInterval(t *testing.T) {
	lb, addr := balancerOfAFreePort(t, time.Hour, func() error { return nil })
	// Waking marks the backend unready: what a cluster whose apiserver is starting looks like.
	lb.SetAsleep(true)
	lb.SetAsleep(false)

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // a test server
	answer := make(chan string, 1)
	go getInto(client, "https://"+lb.Addr().String()+"/healthz", answer)
	// The apiserver comes up while the request is held.
	serveTLS(t, addr, "ok")
	if got := <-answer; got != "ok" {
		t.Errorf("the held request answered %q, want the apiserver's answer", got)
	}
}

// The internal listener of a balancer in front of several apiservers serves the daemons:
// it forwards to the same backends, but its connections are not activity, are never held
// and never wake the cluster; while the cluster sleeps they are refused at once (a
// connection accepted and then closed would have client-go retry its GET for ten seconds),
// and once it wakes the listener is back on the same address.
func TestLoadBalancer_InternalListenerNeitherWakesNorCountsAndFailsFastWhileAsleep(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a, b := tlsBackend(t, "a"), tlsBackend(t, "b")
	var wakes atomic.Int32
	var lb *LoadBalancer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lb, err = Start(Config{Cluster: "ha", Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0",
		Backends:       []string{a.Listener.Addr().String(), b.Listener.Addr().String()},
		HealthInterval: 50 * time.Millisecond, Metrics: m, Log: slog.New(slog.DiscardHandler),
		Wake: func() error { wakes.Add(1); go lb.SetAsleep(false); return nil },
		Now:  func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	if !lb.Matches(lb.addr, lb.internal, lb.backends) || lb.Matches(lb.addr, "", lb.backends) {
		t.Errorf("Matches ignores the internal address")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // a test server
	get := func(addr net.Addr) string {
		out := make(chan string, 1)
		getInto(client, "https://"+addr.String()+"/", out)
		return <-out
	}

	for range 2 {
		if got := get(lb.InternalAddr()); got != "a" && got != "b" {
			t.Fatalf("through the internal listener: %q, want a backend's answer", got)
		}
	}
	if got := lb.LastAccept(); !got.IsZero() {
		t.Errorf("internal connections counted as activity: last accept %v", got)
	}

	lb.SetAsleep(true)
	start := time.Now()
	if c, err := net.DialTimeout("tcp", lb.InternalAddr().String(), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Errorf("dialling the internal listener of the sleeping cluster: %v, want the connection refused", err)
	}
	if got := get(lb.InternalAddr()); got == "a" || got == "b" {
		t.Errorf("the internal listener forwarded to the sleeping cluster: %q", got)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("an internal connection to the sleeping cluster took %v to fail, want at once", took)
	}
	if n := wakes.Load(); n != 0 {
		t.Errorf("an internal connection asked for %d wakes", n)
	}

	// The public listener wakes it and counts.
	if got := get(lb.Addr()); got != "a" && got != "b" {
		t.Fatalf("through the public listener of the sleeping cluster: %q, want a backend's answer", got)
	}
	if n := wakes.Load(); n != 1 {
		t.Errorf("a public connection asked for %d wakes, want 1", n)
	}
	if got := lb.LastAccept(); !got.Equal(at) {
		t.Errorf("last accept %v after a public connection, want %v", got, at)
	}
	if got := get(lb.InternalAddr()); got != "a" && got != "b" {
		t.Errorf("through the internal listener once awake: %q", got)
	}
}
