package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A streaming handler flushes through the router's middleware and ends when the server
// shuts down, so a shutdown neither waits for it nor reports an error.
func TestServer_StreamingHandler_FlushesAndEndsAtShutdown(t *testing.T) {
	r := NewRouter(Config{})
	r.Get("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": hello\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-Closing(r.Context()):
		case <-r.Context().Done():
		}
	})
	s := NewServer("127.0.0.1:0", r, nil)
	s.ShutdownTimeout = time.Minute // a handler holding the shutdown would show as a hang
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startServer(t, ctx, s)

	resp, err := http.Get("http://" + s.Addr() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ": hello") {
		t.Fatalf("first line = %q, %v (not flushed?)", line, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start after shutdown with an open stream: %v", err)
	}
}

func TestRouter_ServesTheOpenAPIDocumentWhenGiven(t *testing.T) {
	env := newTestEnv(t, Config{OpenAPI: []byte(`{"openapi":"3.0.3"}`)}, nil)
	got := env.get(t, PathOpenAPI)
	if got.status != http.StatusOK || got.header.Get("Content-Type") != "application/json" || strings.TrimSpace(string(got.body)) != `{"openapi":"3.0.3"}` {
		t.Fatalf("GET /openapi.json = %d %s %s", got.status, got.header.Get("Content-Type"), got.body)
	}
	env2 := newTestEnv(t, Config{}, nil)
	if got := env2.get(t, PathOpenAPI); got.status != http.StatusNotFound {
		t.Fatalf("without a document: %d", got.status)
	}
}
