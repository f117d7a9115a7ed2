package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/api"
)

// Config configures a daemon's router.
type Config struct {
	// Name is the daemon's name, the "daemon" label on the HTTP metrics.
	Name string
	// Logger receives request logs and the causes of 5xx answers; nil discards them.
	Logger *slog.Logger
	// RequestLogLevel is the level of each request's log (default Info; probes and scrapes log
	// at Debug): a daemon polled all the time sets slog.LevelDebug.
	RequestLogLevel slog.Level
	// Registry receives the HTTP metrics and is served on /metrics; nil makes a fresh one.
	Registry *prometheus.Registry
	// MaxBodyBytes limits request bodies (default DefaultMaxBodyBytes, 1 MiB).
	MaxBodyBytes int64
	// Ready answers /readyz: nil error means ready, an error names what is not. Nil: always ready.
	Ready func(ctx context.Context) error
	// Leads, when set, answers /leaderz: nil when this replica of a daemon leads and serves
	// its routes, an error (503) when it stands by or is not ready. /readyz says whether a
	// replica is healthy, standby or not, so that a Deployment of several counts every one;
	// /leaderz is what a client that must reach the leader (the gateway) asks. Nil: no
	// /leaderz route.
	Leads func(ctx context.Context) error
	// Health, when set, answers /healthz instead of a plain {"status":"ok"}: it returns a
	// detail to show (for example every daemon's state) and whether all is healthy (503 if not).
	Health func(ctx context.Context) (detail any, healthy bool)
	// Gatherer, when set, is served on /metrics instead of Registry (for a front door that
	// shows several daemons' registries); the HTTP metrics still go to Registry.
	Gatherer prometheus.Gatherer
	// TracerProvider, when set, starts a server span per request, continuing a W3C trace
	// context sent by the caller.
	TracerProvider trace.TracerProvider
	// OpenAPI, when set, is served on /openapi.json as application/json (the API's
	// description, api.OpenAPI()).
	OpenAPI []byte
	// Middlewares run after the built-in ones (request id, logging, metrics, recovery, body
	// limit), for every route including /healthz. The returned router accepts no r.Use.
	Middlewares []func(http.Handler) http.Handler
}

// Paths of the endpoints every router serves.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathLeaderz = "/leaderz"
	PathMetrics = "/metrics"
	PathOpenAPI = "/openapi.json"
)

// readyTimeout bounds one Ready call.
const readyTimeout = 5 * time.Second

// NewRouter returns a chi router with hostplane's middleware stack and the /healthz, /readyz and
// /metrics endpoints. Callers add their routes to it (r.Route("/v1", ...), r.Mount, r.Get, ...);
// another NewRouter can mount it, in which case the outer router logs and traces each request
// once and each router records its own metrics.
//
// The stack, outermost first: request id (X-Request-Id, kept if the caller sent a sane one),
// tracing, request log and RED metrics, panic recovery (500 problem, stack logged once), body
// size limit, then Config.Middlewares. Unknown routes answer a 404 problem, known routes with
// another method a 405 problem with an Allow header.
func NewRouter(cfg Config) chi.Router {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Name == "" {
		cfg.Name = "hostplane"
	}
	in := &instrumenter{daemon: cfg.Name, log: cfg.Logger, level: cfg.RequestLogLevel, metrics: newHTTPMetrics(cfg.Registry)}
	if cfg.TracerProvider != nil {
		in.tracer = cfg.TracerProvider.Tracer("github.com/hostplane/hostplane/pkg/httpapi")
	}

	r := chi.NewRouter()
	r.Use(requestID, in.middleware, recoverer, limitBody(cfg.MaxBodyBytes))
	r.Use(cfg.Middlewares...)
	r.NotFound(notFound)
	r.MethodNotAllowed(methodNotAllowed)

	r.Get(PathHealthz, healthz(cfg.Health))
	r.Get(PathReadyz, readyz(cfg.Ready, "ready"))
	if cfg.Leads != nil {
		r.Get(PathLeaderz, readyz(cfg.Leads, "leading"))
	}
	var gatherer prometheus.Gatherer = cfg.Registry
	if cfg.Gatherer != nil {
		gatherer = cfg.Gatherer
	}
	r.Method(http.MethodGet, PathMetrics, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	if cfg.OpenAPI != nil {
		r.Get(PathOpenAPI, openAPI(cfg.OpenAPI))
	}
	return r
}

func openAPI(doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		_, _ = w.Write(doc)
	}
}

func healthz(health func(context.Context) (any, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if health == nil {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		detail, ok := health(ctx)
		cancel()
		status, code := "ok", http.StatusOK
		if !ok {
			status, code = "unhealthy", http.StatusServiceUnavailable
		}
		WriteJSON(w, code, map[string]any{"status": status, "components": detail})
	}
}

// readyz answers 200 {"status": state} when ready is nil or reports nil, else a 503 problem
// naming why not.
func readyz(ready func(context.Context) error, state string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			err := ready(ctx)
			cancel()
			if err != nil {
				msg := "not " + state + ": " + err.Error()
				if ae, ok := errors.AsType[*api.Error](err); ok && ae.Message != "" {
					msg = "not " + state + ": " + ae.Message
				}
				LoggerFrom(r.Context()).DebugContext(r.Context(), "not "+state, "error", err)
				writeProblem(w, r, &api.Error{Code: api.CodeUnavailable, Message: msg, Err: err}, false)
				return
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": state})
	}
}

func notFound(w http.ResponseWriter, r *http.Request) {
	markUnmatched(r.Context())
	writeProblem(w, r, api.Errorf(api.CodeNotFound, "no route for %s", r.URL.Path), false)
}

// allowCandidates are the methods probed for a 405's Allow header.
var allowCandidates = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	markUnmatched(r.Context())
	for _, m := range allowedMethods(r) {
		w.Header().Add("Allow", m)
	}
	writeProblem(w, r, api.Errorf(api.CodeMethod, "method %s is not allowed on %s", r.Method, r.URL.Path), false)
}

// allowedMethods lists the methods r's path has routes for. chi knows them but does not pass
// them to a custom MethodNotAllowed handler, so they are looked up again from the root router.
func allowedMethods(r *http.Request) []string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil || rctx.Routes == nil {
		return nil
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allowed []string
	for _, m := range allowCandidates {
		if routeExists(rctx.Routes, m, path) {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// routeExists reports whether routes has an endpoint for method and path. chi's Find answers
// yes for any method on a mount's exact path ("/v1/clusters" of a router mounted there), so
// such an answer is checked again in the mounted router.
func routeExists(routes chi.Routes, method, path string) bool {
	for range 16 { // deeper than any real nesting of mounts
		rctx := chi.NewRouteContext()
		if routes.Find(rctx, method, path) == "" {
			return false
		}
		// Find went through the mounts in RoutePatterns; follow it to the router it ended in.
		pats := rctx.RoutePatterns
		if len(pats) == 0 {
			return true
		}
		for _, p := range pats[:len(pats)-1] {
			if routes = mountedAt(routes, p); routes == nil {
				return true
			}
		}
		last := pats[len(pats)-1]
		if strings.HasSuffix(last, "*") {
			return true
		}
		sub := mountedAt(routes, strings.TrimSuffix(last, "/")+"/*")
		if sub == nil {
			return true // a real endpoint, not a mount's stub
		}
		routes, path = sub, "/"
	}
	return false
}

// mountedAt returns the chi router mounted on routes at pattern ("/v1/*"), or nil.
func mountedAt(routes chi.Routes, pattern string) chi.Routes {
	for _, rt := range routes.Routes() {
		if rt.SubRoutes != nil && rt.Pattern == pattern {
			return rt.SubRoutes
		}
	}
	return nil
}
