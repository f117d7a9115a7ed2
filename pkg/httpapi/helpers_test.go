package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// syncBuffer is the server's log, shared by its goroutines and the test.
type syncBuffer struct{ testenv.SyncBuffer }

// records returns the JSON log records written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, rec)
	}
	return out
}

// withMsg returns the records whose msg is msg.
func withMsg(recs []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

type testEnv struct {
	srv  *httptest.Server
	logs *syncBuffer
	reg  *prometheus.Registry
}

// newTestEnv serves NewRouter(cfg) plus routes over real HTTP. Name, Logger and Registry are
// filled in when cfg leaves them empty.
func newTestEnv(t *testing.T, cfg Config, routes func(r chi.Router)) *testEnv {
	t.Helper()
	env := &testEnv{logs: &syncBuffer{}}
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.Logger == nil {
		cfg.Logger = observe.NewLogger(env.logs, slog.LevelDebug)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	env.reg = cfg.Registry
	r := NewRouter(cfg)
	if routes != nil {
		routes(r)
	}
	env.srv = httptest.NewServer(r)
	t.Cleanup(env.srv.Close)
	return env
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (env *testEnv) do(t *testing.T, req *http.Request) response {
	t.Helper()
	res, err := env.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading answer: %v", err)
	}
	return response{status: res.StatusCode, header: res.Header, body: body}
}

func (env *testEnv) request(t *testing.T, method, path string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, env.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return env.do(t, req)
}

func (env *testEnv) get(t *testing.T, path string) response {
	t.Helper()
	return env.request(t, http.MethodGet, path, nil, nil)
}

// problem checks that res is a problem+json answer with status and returns it.
func (res response) problem(t *testing.T, status int) Problem {
	t.Helper()
	if res.status != status {
		t.Fatalf("status = %d, want %d; body %s", res.status, status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %q", ct, ContentTypeProblem)
	}
	var p Problem
	if err := json.Unmarshal(res.body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, res.body)
	}
	if p.Status != status {
		t.Errorf("problem status = %d, want %d", p.Status, status)
	}
	if !strings.HasPrefix(p.Type, ProblemTypeBase) || p.Title == "" {
		t.Errorf("problem type/title = %q/%q", p.Type, p.Title)
	}
	return p
}

// scrape renders reg in the text exposition format.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttpHandler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

func promhttpHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
