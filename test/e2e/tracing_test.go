package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// tracedStack is stack with every daemon tracing into exp, each under its own service.name
// (hostplane-<daemon>), as the daemons do when they export to a collector.
func tracedStack(t *testing.T, exp sdktrace.SpanExporter) *client {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	var mu sync.Mutex
	var providers []*sdktrace.TracerProvider
	t.Cleanup(func() { // after the stack stopped (cleanups run last-in first-out)
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range providers {
			_ = tp.Shutdown(context.Background())
		}
	})
	dir := t.TempDir()
	s, err := dev.Start(context.Background(), dev.Config{
		DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1,
		Logger: slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		TracerProvider: func(daemon string) trace.TracerProvider {
			tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "hostplane-" + daemon, Exporter: exp})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			providers = append(providers, tp)
			mu.Unlock()
			return tp
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	c := newClient(t, s.URL(), s.AdminToken(), dir)
	testenv.Eventually(t, time.Minute, func() bool {
		code, _ := c.do("GET", "/healthz", "", nil)
		return code == http.StatusOK
	}, "hostplane dev never became healthy")
	return c
}

// TestTracing_ClusterCreate_IsOneTraceAcrossTheDaemons creates a cluster through the API and
// follows the POST's trace: clusterd answers it, infrad allocates, pkid issues, componentd
// starts the control plane, clusterd reports it Available, all in one trace whose every span
// hangs off the POST's server span, the daemons' steps and Kubernetes API calls included.
func TestTracing_ClusterCreate_IsOneTraceAcrossTheDaemons(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	c := tracedStack(t, exp)

	rel := release.Latest().Version
	code, body := c.do("POST", "/v1/clusters", `{"name":"traced","spec":{"release":{"version":"`+rel+`"},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	c.waitCondition("traced", api.ConditionAvailable, api.ConditionTrue, available)

	var post tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "POST /v1/clusters" && service(s) == "hostplane-clusterd" {
			post = s
		}
	}
	if !post.SpanContext.IsValid() {
		t.Fatalf("clusterd made no span named \"POST /v1/clusters\"; spans: %s", names(exp.GetSpans()))
	}
	if post.SpanKind != trace.SpanKindServer || post.Parent.IsValid() {
		t.Errorf("POST span: kind %v, parent %v; want a server span that starts the trace", post.SpanKind, post.Parent)
	}
	tid := post.SpanContext.TraceID()

	// Spans keep ending after Available (the reconciles that published it); wait until the
	// trace has what a create does and every span's parent is in it.
	wantServices := []string{"hostplane-clusterd", "hostplane-infrad", "hostplane-pkid", "hostplane-componentd"}
	wantSteps := []string{"infrad allocate", "pkid issue", "componentd start " + release.KubeAPIServer, "kube "}
	var problems []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		problems = checkTrace(exp.GetSpans(), tid, wantServices, wantSteps)
		return len(problems) == 0
	}, "trace %s of the create: %s", tid, lazyProblems{&problems})

	// Nothing the create caused in these daemons started a trace of its own.
	for _, s := range exp.GetSpans() {
		if s.Parent.IsValid() || s.SpanContext.TraceID() == tid || !slices.Contains(wantServices, service(s)) {
			continue
		}
		if k := attr(s, "hostplane.key"); k == "traced" || strings.HasPrefix(k, "traced/") {
			t.Errorf("orphan root span %q of %s for the cluster (trigger %q), outside the create's trace",
				s.Name, service(s), attr(s, "hostplane.trigger"))
		}
	}
}

// checkTrace lists what trace tid lacks: a span of each service, a span whose name starts
// with each step, a parent in the trace for every span but its one root.
func checkTrace(all tracetest.SpanStubs, tid trace.TraceID, services, steps []string) []string {
	ids := map[trace.SpanID]bool{}
	var in tracetest.SpanStubs
	for _, s := range all {
		if s.SpanContext.TraceID() == tid {
			in = append(in, s)
			ids[s.SpanContext.SpanID()] = true
		}
	}
	var problems []string
	for _, svc := range services {
		if !slices.ContainsFunc(in, func(s tracetest.SpanStub) bool { return service(s) == svc }) {
			problems = append(problems, "no span of "+svc)
		}
	}
	for _, step := range steps {
		if !slices.ContainsFunc(in, func(s tracetest.SpanStub) bool { return strings.HasPrefix(s.Name, step) }) {
			problems = append(problems, fmt.Sprintf("no span named %q...", step))
		}
	}
	roots := 0
	for _, s := range in {
		switch {
		case !s.Parent.IsValid():
			roots++
		case !ids[s.Parent.SpanID()]:
			problems = append(problems, fmt.Sprintf("span %q of %s has a parent that is not in the trace", s.Name, service(s)))
		}
	}
	if roots != 1 {
		problems = append(problems, fmt.Sprintf("%d root spans, want 1", roots))
	}
	if len(problems) > 0 {
		problems = append(problems, "spans: "+names(in))
	}
	return problems
}

func service(s tracetest.SpanStub) string {
	v, _ := s.Resource.Set().Value("service.name")
	return v.AsString()
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) string {
	var out []string
	for _, s := range spans {
		out = append(out, strings.TrimPrefix(service(s), "hostplane-")+": "+s.Name)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ", ")
}

type lazyProblems struct{ p *[]string }

func (l lazyProblems) String() string { return strings.Join(*l.p, "; ") }
