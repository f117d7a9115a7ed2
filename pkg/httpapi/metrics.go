package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/observe"
)

// Names of the HTTP metrics.
const (
	MetricRequestsTotal   = "hostplane_http_requests_total"
	MetricRequestDuration = "hostplane_http_request_duration_seconds"
)

// RouteUnmatched is the route label of requests no route matched (404, 405), so that scanners
// probing random paths cannot grow the metrics without bound.
const RouteUnmatched = "unmatched"

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the HTTP metrics in reg, or reuses those a router registered there
// before (several routers may share a registry; the daemon label tells them apart).
func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	r := observe.NewRegistrar(reg)
	m := &httpMetrics{
		requests: observe.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequestsTotal,
			Help: "HTTP requests answered, by daemon, route pattern, method and status code.",
		}, []string{"daemon", "route", "method", "code"})),
		duration: observe.Add(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time to answer HTTP requests, by daemon, route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"daemon", "route", "method"})),
	}
	if err := r.Err(); err != nil {
		panic("httpapi: registering HTTP metrics: " + err.Error())
	}
	return m
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}
