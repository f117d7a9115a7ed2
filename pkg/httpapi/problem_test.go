package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestWriteProblem_MapsCodesToStatuses(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:4222: connection refused")
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   api.Code
		wantDetail string
		wantFields []api.FieldError
	}{
		{name: "invalid with fields", wantStatus: 400, wantCode: api.CodeInvalid,
			err: func() error {
				var fe api.FieldErrors
				fe.Add("spec.release.version", "must be one of %v", []string{"1.33.7", "1.34.4"})
				return fe.Err()
			}(),
			wantDetail: "the request has invalid fields",
			wantFields: []api.FieldError{{Field: "spec.release.version", Detail: "must be one of [1.33.7 1.34.4]"}}},
		{name: "unauthenticated", err: api.Errorf(api.CodeUnauthenticated, "no token"), wantStatus: 401, wantCode: api.CodeUnauthenticated, wantDetail: "no token"},
		{name: "forbidden", err: api.Errorf(api.CodeForbidden, "needs admin"), wantStatus: 403, wantCode: api.CodeForbidden, wantDetail: "needs admin"},
		{name: "not found", err: api.Errorf(api.CodeNotFound, `cluster "demo" not found`), wantStatus: 404, wantCode: api.CodeNotFound, wantDetail: `cluster "demo" not found`},
		{name: "method", err: api.Errorf(api.CodeMethod, "no"), wantStatus: 405, wantCode: api.CodeMethod},
		{name: "conflict", err: api.Errorf(api.CodeConflict, "exists"), wantStatus: 409, wantCode: api.CodeConflict, wantDetail: "exists"},
		{name: "too large", err: api.Errorf(api.CodeTooLarge, "big"), wantStatus: 413, wantCode: api.CodeTooLarge},
		{name: "unsupported type", err: api.Errorf(api.CodeUnsupported, "xml"), wantStatus: 415, wantCode: api.CodeUnsupported},
		{name: "unavailable keeps its message, hides the cause", err: &api.Error{Code: api.CodeUnavailable, Message: "nats is down", Err: secret},
			wantStatus: 503, wantCode: api.CodeUnavailable, wantDetail: "nats is down"},
		{name: "wrapped application error", err: fmt.Errorf("create: %w", api.Errorf(api.CodeConflict, "exists")), wantStatus: 409, wantCode: api.CodeConflict},
		{name: "internal hides message and cause", err: &api.Error{Code: api.CodeInternal, Message: "kv bucket corrupt", Err: secret},
			wantStatus: 500, wantCode: api.CodeInternal, wantDetail: "an internal error occurred"},
		{name: "nats out of reach is unavailable", err: fmt.Errorf("get clusters demo: %w", nats.ErrConnectionClosed), wantStatus: 503, wantCode: api.CodeUnavailable, wantDetail: "not reachable right now"},
		{name: "an internal error caused by nats out of reach is unavailable", err: &api.Error{Code: api.CodeInternal, Message: "reading the cluster failed", Err: fmt.Errorf("get demo: %w", nats.ErrTimeout)},
			wantStatus: 503, wantCode: api.CodeUnavailable, wantDetail: "retry shortly"},
		{name: "jetstream not answering is unavailable", err: fmt.Errorf("list: %w", jetstream.ErrNoStreamResponse), wantStatus: 503, wantCode: api.CodeUnavailable, wantDetail: "retry shortly"},
		{name: "plain error is internal", err: secret, wantStatus: 500, wantCode: api.CodeInternal, wantDetail: "an internal error occurred"},
		{name: "unknown code is internal", err: api.Errorf("teapot", "short and stout"), wantStatus: 500, wantCode: api.CodeInternal},
	}
	var current error
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/fail", Handle(func(http.ResponseWriter, *http.Request) error { return current }))
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current = tt.err
			res := env.get(t, "/v1/fail")
			p := res.problem(t, tt.wantStatus)
			if p.Code() != tt.wantCode {
				t.Errorf("code = %q, want %q", p.Code(), tt.wantCode)
			}
			if !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tt.wantDetail)
			}
			if fmt.Sprint(p.Errors) != fmt.Sprint(tt.wantFields) {
				t.Errorf("errors = %v, want %v", p.Errors, tt.wantFields)
			}
			if p.Instance != "/v1/fail" {
				t.Errorf("instance = %q", p.Instance)
			}
			for _, leak := range []string{"10.0.0.7", "kv bucket", "stout"} {
				if strings.Contains(string(res.body), leak) {
					t.Errorf("answer leaks %q: %s", leak, res.body)
				}
			}
			if tt.wantStatus == 500 && !strings.Contains(p.Detail, p.RequestID) {
				t.Errorf("internal detail %q does not quote request id %q", p.Detail, p.RequestID)
			}
		})
	}
}

func TestWriteProblem_LogsInternalCauseWithRequestID(t *testing.T) {
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/fail", Handle(func(http.ResponseWriter, *http.Request) error {
			return fmt.Errorf("reading kv: %w", errors.New("bucket gone"))
		}))
	})
	res := env.request(t, http.MethodGet, "/v1/fail", nil, map[string]string{RequestIDHeader: "req-42"})
	p := res.problem(t, 500)
	if p.RequestID != "req-42" || res.header.Get(RequestIDHeader) != "req-42" {
		t.Errorf("request id not kept: problem %q header %q", p.RequestID, res.header.Get(RequestIDHeader))
	}
	failed := withMsg(env.logs.records(t), "request failed")
	if len(failed) != 1 {
		t.Fatalf("%d 'request failed' records, want 1", len(failed))
	}
	if failed[0]["error"] != "reading kv: bucket gone" || failed[0]["request_id"] != "req-42" {
		t.Errorf("log record = %v", failed[0])
	}
}

// A caller that gives up (a client timeout, a closed connection) is not the daemon's failure:
// no "request failed" error and no 500, only a debug record.
func TestWriteProblem_CallerGoneBeforeTheAnswer_IsNoError(t *testing.T) {
	done := make(chan struct{})
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/slow", func(w http.ResponseWriter, r *http.Request) {
			defer close(done)
			Handle(func(_ http.ResponseWriter, r *http.Request) error {
				<-r.Context().Done()
				return fmt.Errorf("get c1: %w", r.Context().Err())
			})(w, r)
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.srv.URL+"/v1/slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.srv.Client().Do(req); err == nil {
		t.Fatal("the request was answered; want the client to give up")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never returned after its caller went away")
	}
	records := env.logs.records(t)
	if failed := withMsg(records, "request failed"); len(failed) != 0 {
		t.Errorf("a caller that went away was logged as a failure: %v", failed)
	}
	if gone := withMsg(records, "request abandoned by its caller"); len(gone) != 1 || gone[0]["error"] != "get c1: context canceled" {
		t.Errorf("want one debug record of the abandoned request, got %v", gone)
	}
}

func TestWriteProblem_AfterAnswerStartedOnlyLogs(t *testing.T) {
	env := newTestEnv(t, Config{}, func(r chi.Router) {
		r.Get("/v1/half", Handle(func(w http.ResponseWriter, _ *http.Request) error {
			WriteJSON(w, http.StatusOK, map[string]string{"partial": "yes"})
			return api.Errorf(api.CodeConflict, "too late")
		}))
	})
	res := env.get(t, "/v1/half")
	if res.status != 200 || strings.Contains(string(res.body), "too late") {
		t.Fatalf("answer changed after it started: %d %s", res.status, res.body)
	}
	failed := withMsg(env.logs.records(t), "request failed")
	if len(failed) != 1 || failed[0]["answer_started"] != true {
		t.Errorf("want one log of the late error, got %v", failed)
	}
}

func TestProblem_ErrRoundTrip(t *testing.T) {
	tests := []struct {
		problem Problem
		want    api.Code
	}{
		{Problem{Type: ProblemTypeBase + "conflict", Status: 409}, api.CodeConflict},
		{Problem{Type: "about:blank", Status: 404}, api.CodeNotFound},
		{Problem{Type: "about:blank", Status: 418}, api.CodeInternal},
	}
	for _, tt := range tests {
		if got := tt.problem.Err().Code; got != tt.want {
			t.Errorf("%+v: code %q, want %q", tt.problem, got, tt.want)
		}
	}
	for code, status := range statusByCode {
		if StatusOf(code) != status {
			t.Errorf("StatusOf(%q) = %d, want %d", code, StatusOf(code), status)
		}
	}
}
