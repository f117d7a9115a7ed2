package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// While NATS is down (a restart, a failover), a read of a bucket fails; the caller is told
// to retry (503 unavailable), not that the daemon broke (500).
func TestWriteProblem_NATSDownIsUnavailable(t *testing.T) {
	env := testenv.NATS(t)
	kv, err := env.JS.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "problem"})
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.Handle(func(_ http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		_, err := kv.Get(ctx, "demo")
		return err
	})
	env.Server.Stop()

	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/v1/clusters/demo", nil))
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	if rec.Code != http.StatusServiceUnavailable || p.Type != httpapi.ProblemTypeBase+string(api.CodeUnavailable) {
		t.Fatalf("with NATS stopped: %d %s, want 503 %s", rec.Code, rec.Body, api.CodeUnavailable)
	}
}

// A JetStream cluster without a leader for a moment (a server lost, an election) answers its
// API calls 503 "JetStream system temporarily unavailable"; clients get that as 503 too, and
// a JetStream refusal of another kind (here: a bucket that does not exist) stays a 500.
func TestWriteProblem_JetStreamUnavailableIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no leader", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, http.StatusServiceUnavailable},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := httpapi.Handle(func(http.ResponseWriter, *http.Request) error {
				return fmt.Errorf("read cluster demo: %w", tc.err)
			})
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest("GET", "/v1/clusters/demo", nil))
			if rec.Code != tc.want {
				t.Fatalf("%v: answered %d %s, want %d", tc.err, rec.Code, rec.Body, tc.want)
			}
		})
	}
}
