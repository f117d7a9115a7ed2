package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/observe"
)

func TestSpanName_NamesTheResource(t *testing.T) {
	tests := []struct{ method, path, want string }{
		{"GET", "/api/v1/namespaces", "kube GET namespaces"},
		{"PATCH", "/api/v1/namespaces/demo", "kube PATCH namespaces"},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", "kube PUT pods/status"},
		{"POST", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments", "kube POST machinedeployments"},
		{"PATCH", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments/md/scale", "kube PATCH machinedeployments/scale"},
		{"GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "kube GET certificatesigningrequests"},
		{"GET", "/version", "kube GET version"},
		{"GET", "/apis", "kube GET apis"},
		{"GET", "/api/v1", "kube GET discovery"},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(tt.method, "https://apiserver"+tt.path, nil)
		if got := SpanName(r); got != tt.want {
			t.Errorf("SpanName(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

// A call made inside a span gets a client span of that span's provider and carries the trace
// to the apiserver; a call outside any span (an informer's watch) makes none.
func TestTraced_CallInsideASpanIsTracedAndPropagated(t *testing.T) {
	var mu sync.Mutex
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"demo"}}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(Traced(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp, err := observe.NewTracerProvider(context.Background(), observe.TracingConfig{ServiceName: "test", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()

	ctx, span := tp.Tracer("test").Start(context.Background(), "reconcile")
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "demo", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	span.End()
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "demo", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	var client []string
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			client = append(client, s.Name)
			if s.Parent.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("client span's parent = %s, want the reconcile span", s.Parent.SpanID())
			}
		}
	}
	if len(client) != 1 || client[0] != "kube GET namespaces" {
		t.Errorf("client spans = %q, want one \"kube GET namespaces\"", client)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(traceparents) != 2 || traceparents[0] == "" || traceparents[1] != "" {
		t.Errorf("traceparent headers = %q, want one for the traced call and none for the other", traceparents)
	}
}
