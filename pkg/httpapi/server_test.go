package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// startServer runs s.Start in the background; the returned channel yields its result.
func startServer(t *testing.T, ctx context.Context, s *Server) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	return done
}

func TestServer_ServesUntilContextEndsThenStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer("127.0.0.1:0", NewRouter(Config{}), nil)
	done := startServer(t, ctx, s)

	addr := s.Addr()
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
		t.Fatalf("Addr() = %q", addr)
	}
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	if err := s.Start(ctx); !errors.Is(err, ErrServerStarted) {
		t.Errorf("second Start: %v, want ErrServerStarted", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start after cancel: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after Start returned")
	}
}

func TestServer_ShutdownWaitsForRequestsInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := NewRouter(Config{})
	r.Get("/slow", func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		WriteJSON(w, 200, map[string]string{"done": "yes"})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer("127.0.0.1:0", r, nil)
	done := startServer(t, ctx, s)

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		res, err := http.Get("http://" + s.Addr() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- result{status: res.StatusCode, body: string(b), err: err}
	}()
	<-entered
	cancel() // shutdown begins with the request in flight
	close(release)

	res := <-got
	if res.err != nil || res.status != 200 {
		t.Fatalf("in-flight request: %d %q %v", res.status, res.body, res.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func TestServer_ListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(ln.Addr().String(), http.NotFoundHandler(), nil)
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
	if got := s.Addr(); got != "" {
		t.Errorf("Addr() after failure = %q, want empty", got)
	}
}

func TestServer_TLS(t *testing.T) {
	borrowed := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate and client
	client, tlsConfig := borrowed.Client(), borrowed.TLS.Clone()
	borrowed.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer("127.0.0.1:0", NewRouter(Config{}), nil)
	s.TLSConfig = tlsConfig
	done := startServer(t, ctx, s)

	res, err := client.Get("https://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil {
		t.Errorf("status %d, TLS %v", res.StatusCode, res.TLS != nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
}
