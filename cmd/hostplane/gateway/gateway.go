// Package gateway is hostplane's API gateway: one HTTP front for daemons that run as separate
// processes (docker compose, Kubernetes). Every operation of the OpenAPI document names the
// daemon that owns it (x-owner); the gateway routes each to that daemon's admin port with a
// reverse proxy, leaves access control to the daemons (the Authorization header passes
// through; over https it presents its client certificate, without which a daemon with a
// client CA refuses the call: pkg/mtls), continues the caller's trace, and answers /healthz, /readyz, /metrics,
// /openapi.json and the web console (/ui, static files) itself. `hostplane gateway` runs it;
// `hostplane dev` does not need it (its front door serves the daemons in-process).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/cmd/hostplane/internal/console"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/observe"
)

// Name is the "daemon" label of the gateway's own HTTP metrics.
const Name = "gateway"

// DefaultProbeTimeout bounds each backend's /leaderz probe behind the gateway's /readyz.
const DefaultProbeTimeout = 2 * time.Second

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("gateway: bad configuration")

// Config configures a gateway.
type Config struct {
	// Backends maps each daemon to the base URL of its admin port ("http://clusterd:8081"),
	// or to a comma-separated list of its replicas' admin ports. A daemon with several
	// replicas is listed, or named by a host name that resolves to each replica's address
	// (a Kubernetes headless Service): the gateway routes to the one whose /leaderz answers
	// 200, the one that leads (see replicas). Every owner the OpenAPI document names needs one.
	Backends map[string]string
	// LookupHost resolves a backend's host name to its replicas' addresses; nil uses the
	// system's resolver.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// Logger; nil discards.
	Logger *slog.Logger
	// Registry receives the gateway's HTTP metrics and is served on /metrics; nil makes one.
	Registry *prometheus.Registry
	// TracerProvider, when set, starts a span per request; the trace context is passed on to
	// the daemon either way.
	TracerProvider trace.TracerProvider
	// BackendTLS is how the gateway reaches https:// backends: the management CA that
	// verifies each daemon's certificate and the gateway's client certificate, which a
	// daemon with a client CA requires of every API call (pkg/mtls). Used when Transport is nil.
	BackendTLS mtls.ClientConfig
	// Transport carries the proxied requests; nil uses http.DefaultTransport (with BackendTLS).
	Transport http.RoundTripper
	// ProbeTimeout bounds each backend probe of /leaderz (default
	// DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// GrafanaURL is the base URL of a Grafana with the dashboards of deploy/grafana; the web
	// console (/ui) links into them. Empty hides the links.
	GrafanaURL string
}

// Owners returns the daemons the OpenAPI document routes to, sorted.
func Owners() ([]string, error) {
	routes, err := api.Routes()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range routes {
		if !slices.Contains(out, r.Owner) {
			out = append(out, r.Owner)
		}
	}
	sort.Strings(out)
	return out, nil
}

// gateway holds the parsed backends.
type gateway struct {
	cfg      Config
	backends map[string]*replicas
}

// New returns the gateway's handler.
func New(cfg Config) (http.Handler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil && cfg.BackendTLS.Enabled() {
		t, err := cfg.BackendTLS.Transport()
		if err != nil {
			return nil, fmt.Errorf("%w: backend TLS: %v", ErrConfig, err)
		}
		cfg.Transport = t
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	routes, err := api.Routes()
	if err != nil {
		return nil, err
	}
	if cfg.LookupHost == nil {
		cfg.LookupHost = net.DefaultResolver.LookupHost
	}
	g := &gateway{cfg: cfg, backends: map[string]*replicas{}}
	owners, _ := Owners()
	var problems []string
	for _, owner := range owners {
		raw := cfg.Backends[owner]
		if raw == "" {
			problems = append(problems, "no backend URL for "+owner)
			continue
		}
		rs, bad := parseReplicas(raw)
		if rs == nil {
			problems = append(problems, fmt.Sprintf("backend URL of %s is %q: want http(s)://host:port, or several separated by commas", owner, bad))
			continue
		}
		rs.lookup = cfg.LookupHost
		rs.setTransport(cfg.Transport)
		g.backends[owner] = rs
	}
	for name := range cfg.Backends {
		if !slices.Contains(owners, name) {
			problems = append(problems, fmt.Sprintf("backend %q owns no route (the daemons are %s)", name, strings.Join(owners, ", ")))
		}
	}
	if err := (console.Config{GrafanaURL: cfg.GrafanaURL}).Validate(); err != nil {
		problems = append(problems, "grafana URL: "+err.Error())
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}

	r := httpapi.NewRouter(httpapi.Config{
		Name:           Name,
		Logger:         cfg.Logger,
		Registry:       cfg.Registry,
		TracerProvider: cfg.TracerProvider,
		OpenAPI:        api.OpenAPI(),
		Ready:          g.ready,
		Health:         g.health,
	})
	proxies := map[string]http.Handler{}
	for owner, u := range g.backends {
		proxies[owner] = g.proxy(owner, u)
	}
	for _, rt := range routes {
		r.Method(rt.Method, rt.Pattern, proxies[rt.Owner])
	}
	console.Mount(r, console.Config{GrafanaURL: cfg.GrafanaURL})
	return r, nil
}

// proxy forwards to one daemon. Responses are flushed as they come, so the event stream
// (text/event-stream) reaches the caller live.
func (g *gateway) proxy(owner string, targets *replicas) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets.pick(pr.In.Context(), g))
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
			observe.Propagator().Inject(pr.In.Context(), propagation.HeaderCarrier(pr.Out.Header))
		},
		Transport:     targets.transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable {
				targets.forget() // a standby, or a leader stopping: look again next time
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			targets.forget()
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the caller went away
			}
			g.cfg.Logger.Warn("backend unreachable", "daemon", owner, "path", r.URL.Path, "err", err)
			httpapi.WriteProblem(w, r, api.Errorf(api.CodeUnavailable, "%s is not reachable right now; retry shortly", owner))
		},
	}
}

// backendState is one daemon's answer to a probe.
type backendState struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Replica is the admin port of the replica that answered, when the daemon has several.
	Replica string `json:"replica,omitempty"`
}

// probeAll asks every backend's path at once.
func (g *gateway) probeAll(ctx context.Context, path string) map[string]backendState {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]backendState{}
	for owner, rs := range g.backends {
		wg.Go(func() {
			u := rs.pick(ctx, g)
			st := backendState{Status: "ok"}
			if err := g.probe(ctx, rs.client, u.JoinPath(path)); err != nil {
				st = backendState{Status: "unhealthy", Error: err.Error()}
			}
			if rs.manyReplicas() {
				st.Replica = u.Host
			}
			mu.Lock()
			out[owner] = st
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// probe wants 200 from GET u through client.
func (g *gateway) probe(ctx context.Context, client *http.Client, u *url.URL) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", u.Path, resp.Status)
	}
	return nil
}

// ready is the gateway's /readyz: every daemon has a replica that leads (its /leaderz
// answers 200: it serves its routes).
func (g *gateway) ready(ctx context.Context) error {
	var bad []string
	for owner, st := range g.probeAll(ctx, httpapi.PathLeaderz) {
		if st.Status != "ok" {
			bad = append(bad, owner+": "+st.Error)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("not ready: %s", strings.Join(bad, "; "))
	}
	return nil
}

// health is the gateway's /healthz: each daemon's readiness, like hostplane dev's front door
// ("ready", or why not), with the admin port of the replica that answered when a daemon has
// several ("ready (127.0.0.1:8181)").
func (g *gateway) health(ctx context.Context) (any, bool) {
	healthy := true
	out := map[string]string{}
	for owner, st := range g.probeAll(ctx, httpapi.PathLeaderz) {
		healthy = healthy && st.Status == "ok"
		msg := "ready"
		if st.Status != "ok" {
			msg = st.Error
		}
		if st.Replica != "" {
			msg += " (" + st.Replica + ")"
		}
		out[owner] = msg
	}
	return out, healthy
}
