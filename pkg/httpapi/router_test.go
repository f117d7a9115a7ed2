package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

func TestRouter_HealthAndReadiness(t *testing.T) {
	var notReady error
	env := newTestEnv(t, Config{Ready: func(context.Context) error { return notReady }}, nil)

	tests := []struct {
		name       string
		path       string
		notReady   error
		wantStatus int
		wantBody   string // JSON "status" for 200s, detail substring for problems
	}{
		{name: "healthz", path: "/healthz", wantStatus: 200, wantBody: "ok"},
		{name: "ready", path: "/readyz", wantStatus: 200, wantBody: "ready"},
		{name: "not ready names the dependency", path: "/readyz", notReady: errors.New("nats: no connection"), wantStatus: 503, wantBody: "nats: no connection"},
		{name: "not ready application error", path: "/readyz", notReady: api.Errorf(api.CodeUnavailable, "kv bucket clusters missing"), wantStatus: 503, wantBody: "kv bucket clusters missing"},
		{name: "healthz while not ready", path: "/healthz", notReady: errors.New("x"), wantStatus: 200, wantBody: "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notReady = tt.notReady
			res := env.get(t, tt.path)
			if tt.wantStatus != 200 {
				p := res.problem(t, tt.wantStatus)
				if p.Code() != api.CodeUnavailable || !strings.Contains(p.Detail, tt.wantBody) {
					t.Errorf("problem = %+v, want unavailable naming %q", p, tt.wantBody)
				}
				return
			}
			var body map[string]string
			if res.status != 200 || json.Unmarshal(res.body, &body) != nil || body["status"] != tt.wantBody {
				t.Errorf("got %d %s, want 200 status %q", res.status, res.body, tt.wantBody)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

// A replica that stands by is ready (healthy) but does not lead: /readyz says 200 and
// /leaderz 503, which is what the gateway asks to find the leader.
func TestRouter_LeaderzAnswersOnlyTheLeadingReplica(t *testing.T) {
	var standby error
	env := newTestEnv(t, Config{
		Ready: func(context.Context) error { return nil },
		Leads: func(context.Context) error { return standby },
	}, nil)
	var body map[string]string
	if res := env.get(t, "/leaderz"); res.status != 200 || json.Unmarshal(res.body, &body) != nil || body["status"] != "leading" {
		t.Errorf("/leaderz of the leader = %d %s, want 200 leading", res.status, res.body)
	}
	standby = errors.New("standing by (clusterd-1 leads)")
	if p := env.get(t, "/leaderz").problem(t, 503); p.Code() != api.CodeUnavailable || !strings.Contains(p.Detail, "not leading: standing by (clusterd-1 leads)") {
		t.Errorf("/leaderz of a standby = %+v", p)
	}
	if res := env.get(t, "/readyz"); res.status != 200 {
		t.Errorf("/readyz of a standby = %d %s, want 200", res.status, res.body)
	}
	// Without Leads (hostplane dev's front door, the gateway) there is no /leaderz.
	if res := newTestEnv(t, Config{}, nil).get(t, "/leaderz"); res.status != 404 {
		t.Errorf("/leaderz without Leads = %d, want 404", res.status)
	}
}

func TestRouter_UnmatchedRoutesAnswerProblems(t *testing.T) {
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Route("/v1/clusters", func(r chi.Router) {
			r.Get("/", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, map[string]any{"items": []any{}}) })
			r.Post("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) })
			r.Get("/{c}", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, nil) })
		})
	})
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantAllow  string
	}{
		{name: "unknown path", method: "GET", path: "/nope", wantStatus: 404},
		{name: "unknown path under a mounted router", method: "GET", path: "/v1/clusters/demo/bogus", wantStatus: 404},
		{name: "wrong method", method: "DELETE", path: "/healthz", wantStatus: 405, wantAllow: "GET"},
		{name: "wrong method on a mounted router", method: "PUT", path: "/v1/clusters", wantStatus: 405, wantAllow: "GET, POST"},
		{name: "unknown method", method: "BREW", path: "/v1/clusters", wantStatus: 405, wantAllow: "GET, POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := env.request(t, tt.method, tt.path, nil, nil)
			p := res.problem(t, tt.wantStatus)
			if p.Instance != tt.path || !strings.Contains(p.Detail, tt.path) {
				t.Errorf("problem does not name the path: %+v", p)
			}
			if got := strings.Join(res.header.Values("Allow"), ", "); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}
}

func TestRouter_PanickingHandlerAnswers500AndServerKeepsServing(t *testing.T) {
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/boom", func(http.ResponseWriter, *http.Request) { panic("nil map in reconcile") })
		r.Get("/v1/ok", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, map[string]bool{"ok": true}) })
	})
	for i := range 2 {
		p := env.get(t, "/v1/boom").problem(t, 500)
		if strings.Contains(p.Detail, "nil map") {
			t.Errorf("panic value leaked: %q", p.Detail)
		}
		if res := env.get(t, "/v1/ok"); res.status != 200 {
			t.Fatalf("after panic %d: status %d", i, res.status)
		}
	}
	recs := env.logs.records(t)
	panics := withMsg(recs, "panic serving request")
	if len(panics) != 2 {
		t.Fatalf("%d panic records for 2 panics", len(panics))
	}
	if s, _ := panics[0]["stack"].(string); !strings.Contains(s, "router_test.go") || panics[0]["panic"] != "nil map in reconcile" {
		t.Errorf("panic record lacks value or stack: %v", panics[0])
	}
	stacks := 0
	for _, r := range recs {
		if _, ok := r["stack"]; ok {
			stacks++
		}
	}
	if stacks != 2 {
		t.Errorf("stack logged %d times for 2 panics", stacks)
	}
}

func TestRouter_RequestLogAndRequestID(t *testing.T) {
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/clusters/{c}", func(w http.ResponseWriter, r *http.Request) {
			LoggerFrom(r.Context()).InfoContext(r.Context(), "handler ran")
			WriteJSON(w, 200, map[string]string{"name": chi.URLParam(r, "c")})
		})
	})
	tests := []struct {
		name   string
		sent   string
		wantID func(string) bool
	}{
		{name: "caller's id kept", sent: "abc-123", wantID: func(id string) bool { return id == "abc-123" }},
		{name: "id generated", sent: "", wantID: func(id string) bool { return len(id) >= 16 }},
		{name: "unsafe id replaced", sent: "evil\tid", wantID: func(id string) bool { return id != "evil\tid" && len(id) >= 16 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := env.request(t, "GET", "/v1/clusters/demo", nil, map[string]string{RequestIDHeader: tt.sent})
			id := res.header.Get(RequestIDHeader)
			if !tt.wantID(id) {
				t.Fatalf("X-Request-Id = %q", id)
			}
			var line, handler map[string]any
			for _, r := range env.logs.records(t) {
				if r["request_id"] == id && r["msg"] == "http request" {
					line = r
				}
				if r["request_id"] == id && r["msg"] == "handler ran" {
					handler = r
				}
			}
			if line == nil || handler == nil {
				t.Fatalf("no request log or handler log with request_id %q", id)
			}
			if line["method"] != "GET" || line["route"] != "/v1/clusters/{c}" || line["status"] != 200.0 || line["duration"] == nil {
				t.Errorf("request log = %v", line)
			}
		})
	}
}

func TestRouter_RequestLogLevel_AppliesToEveryRequestLog(t *testing.T) {
	env := newTestEnv(t, Config{RequestLogLevel: slog.LevelDebug}, func(r chi.Router) {
		r.Get("/machines", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, nil) })
	})
	env.request(t, "GET", "/machines", nil, nil)
	for _, r := range env.logs.records(t) {
		if r["msg"] == "http request" && r["route"] == "/machines" {
			if r["level"] != "DEBUG" {
				t.Fatalf("request log level = %v, want DEBUG", r["level"])
			}
			return
		}
	}
	t.Fatal("no request log for /machines")
}

func TestRouter_MetricsUseRoutePatterns(t *testing.T) {
	env := newTestEnv(t, Config{Name: "clusterd"}, func(r chi.Router) {
		r.Route("/v1", func(r chi.Router) {
			r.Get("/clusters/{c}", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, nil) })
		})
	})
	env.get(t, "/v1/clusters/demo")
	env.get(t, "/v1/clusters/other")
	env.get(t, "/random/scanner/path")
	env.request(t, "POST", "/healthz", nil, nil)

	body := string(env.get(t, "/metrics").body)
	for _, want := range []string{
		`hostplane_http_requests_total{code="200",daemon="clusterd",method="GET",route="/v1/clusters/{c}"} 2`,
		`hostplane_http_requests_total{code="404",daemon="clusterd",method="GET",route="unmatched"} 1`,
		`hostplane_http_requests_total{code="405",daemon="clusterd",method="POST",route="unmatched"} 1`,
		`hostplane_http_request_duration_seconds_count{daemon="clusterd",method="GET",route="/v1/clusters/{c}"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "/v1/clusters/demo") || strings.Contains(body, "scanner") {
		t.Error("raw paths leaked into metric labels")
	}
}

// A front door built with NewRouter mounts daemons' routers built with NewRouter.
func TestRouter_FrontDoorMountsDaemonRouters(t *testing.T) {
	clusterdReg := prometheus.NewRegistry()
	var logs syncBuffer
	clusterd := NewRouter(Config{Name: "clusterd", Registry: clusterdReg, Logger: observe.NewLogger(&logs, slog.LevelDebug)})
	clusterd.Route("/v1/clusters", func(r chi.Router) {
		r.Get("/{c}", func(w http.ResponseWriter, r *http.Request) {
			WriteJSON(w, 200, map[string]string{"name": chi.URLParam(r, "c"), "id": RequestID(r.Context())})
		})
		r.Get("/{c}/boom", func(http.ResponseWriter, *http.Request) { panic("inner") })
	})
	env := newTestEnv(t, Config{Name: "front"}, func(r chi.Router) {
		r.Mount("/", clusterd)
	})

	res := env.request(t, "GET", "/v1/clusters/demo", nil, map[string]string{RequestIDHeader: "front-1"})
	var got map[string]string
	if res.status != 200 || json.Unmarshal(res.body, &got) != nil || got["name"] != "demo" || got["id"] != "front-1" {
		t.Fatalf("mounted route: %d %s", res.status, res.body)
	}
	env.get(t, "/v1/clusters/demo/boom").problem(t, 500)
	env.get(t, "/v1/nothing").problem(t, 404)
	res = env.request(t, "DELETE", "/v1/clusters/demo", nil, nil)
	if res.problem(t, 405); res.header.Get("Allow") != "GET" {
		t.Errorf("Allow through the front door = %q, want GET", res.header.Values("Allow"))
	}
	if res := env.get(t, "/healthz"); res.status != 200 {
		t.Errorf("front door /healthz: %d", res.status)
	}

	// Each router records its own metrics with the full pattern.
	front := string(env.get(t, "/metrics").body)
	want := `hostplane_http_requests_total{code="200",daemon="front",method="GET",route="/v1/clusters/{c}"} 1`
	if !strings.Contains(front, want) {
		t.Errorf("front door /metrics lacks %s", want)
	}
	inner := scrape(t, clusterdReg)
	for _, want := range []string{
		`hostplane_http_requests_total{code="200",daemon="clusterd",method="GET",route="/v1/clusters/{c}"} 1`,
		`hostplane_http_requests_total{code="500",daemon="clusterd",method="GET",route="/v1/clusters/{c}/boom"} 1`,
		`hostplane_http_requests_total{code="404",daemon="clusterd",method="GET",route="unmatched"} 1`,
		`hostplane_http_requests_total{code="405",daemon="clusterd",method="DELETE",route="unmatched"} 1`,
	} {
		if !strings.Contains(inner, want) {
			t.Errorf("clusterd registry lacks %s", want)
		}
	}
	// The request is logged once, by the outermost router.
	if n := len(withMsg(logs.records(t), "http request")); n != 0 {
		t.Errorf("inner router logged %d request lines, want 0", n)
	}
	if n := len(withMsg(env.logs.records(t), "http request")); n != 6 {
		t.Errorf("front door logged %d request lines, want 6", n)
	}
}

func TestRouter_ExtraMiddlewaresAndGroups(t *testing.T) {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" && r.Header.Get("Authorization") == "" {
				WriteProblem(w, r, api.Errorf(api.CodeUnauthenticated, "no token"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	env := newTestEnv(t, Config{Middlewares: []func(http.Handler) http.Handler{auth}}, func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Group", "yes")
					next.ServeHTTP(w, r)
				})
			})
			r.Get("/v1/grouped", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, nil) })
		})
	})
	env.get(t, "/v1/grouped").problem(t, 401)
	res := env.request(t, "GET", "/v1/grouped", nil, map[string]string{"Authorization": "Bearer x"})
	if res.status != 200 || res.header.Get("X-Group") != "yes" {
		t.Errorf("grouped route: %d, X-Group %q", res.status, res.header.Get("X-Group"))
	}
	if res := env.get(t, "/healthz"); res.status != 200 {
		t.Errorf("/healthz: %d", res.status)
	}
}

func TestRouter_TracesRequestsAndLogsTraceID(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "clusterd", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	env := newTestEnv(t, Config{TracerProvider: tp}, func(r chi.Router) {
		r.Get("/v1/clusters/{c}", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, 200, nil) })
	})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	res := env.request(t, "GET", "/v1/clusters/demo", nil, map[string]string{
		"traceparent": fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID),
	})
	if res.status != 200 {
		t.Fatalf("status %d", res.status)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "GET /v1/clusters/{c}" || s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span %q trace %s parent %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	lines := withMsg(env.logs.records(t), "http request")
	if len(lines) != 1 || lines[0]["trace_id"] != traceID {
		t.Errorf("request log lacks trace_id: %v", lines)
	}
}
