package kube

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Traced makes every request cfg's clients send a client span, named "kube <verb> <resource>"
// ("kube PATCH machinedeployments"), in the trace of the request's context, and carries that
// trace to the apiserver in the traceparent header. The span comes from the tracer provider
// of the span already in the request's context (a daemon's reconcile or request span), so a
// request made outside any span — an informer's list and watch — makes none. It returns cfg.
func Traced(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt,
			otelhttp.WithPropagators(observe.Propagator()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return SpanName(r) }),
			otelhttp.WithFilter(func(r *http.Request) bool {
				return trace.SpanFromContext(r.Context()).SpanContext().IsValid()
			}),
		)
	})
	return cfg
}

// SpanName names the span of an apiserver request: "kube <method> <resource>[/<subresource>]"
// from its path (/api/v1/namespaces/ns/pods/name/status → "kube PUT pods/status"); other
// paths (/version, /openapi/v3) are named by their first segment.
func SpanName(r *http.Request) string {
	return "kube " + r.Method + " " + resourceOf(r.URL.Path)
}

func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis/<group>/<version>
	default:
		return parts[0]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/<ns>/<resource>...
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0] // <resource>[/<name>], namespaces[/<name>]
	default:
		return parts[0] + "/" + parts[2] // <resource>/<name>/<subresource>
	}
}
