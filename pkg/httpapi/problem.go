package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/store"
)

// ProblemTypeBase prefixes every problem type; the code follows it.
const ProblemTypeBase = "https://hostplane.dev/problems/"

// ContentTypeProblem is the media type of error answers (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// statusByCode is the one table that maps application error codes to HTTP statuses.
// A code missing here is answered as internal.
var statusByCode = map[api.Code]int{
	api.CodeInvalid:         http.StatusBadRequest,
	api.CodeUnauthenticated: http.StatusUnauthorized,
	api.CodeForbidden:       http.StatusForbidden,
	api.CodeNotFound:        http.StatusNotFound,
	api.CodeMethod:          http.StatusMethodNotAllowed,
	api.CodeConflict:        http.StatusConflict,
	api.CodeTooLarge:        http.StatusRequestEntityTooLarge,
	api.CodeUnsupported:     http.StatusUnsupportedMediaType,
	api.CodeTooMany:         http.StatusTooManyRequests,
	api.CodeUnavailable:     http.StatusServiceUnavailable,
	api.CodeInternal:        http.StatusInternalServerError,
}

// codeByStatus inverts statusByCode for clients reading problems.
var codeByStatus = func() map[int]api.Code {
	m := make(map[int]api.Code, len(statusByCode))
	for c, s := range statusByCode {
		m[s] = c
	}
	return m
}()

// StatusOf returns the HTTP status for code; unknown codes are 500.
func StatusOf(code api.Code) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Problem is the body of an application/problem+json answer.
type Problem struct {
	Type      string           `json:"type"`
	Title     string           `json:"title"`
	Status    int              `json:"status"`
	Detail    string           `json:"detail,omitempty"`
	Instance  string           `json:"instance,omitempty"`
	Errors    []api.FieldError `json:"errors,omitempty"`
	RequestID string           `json:"requestId,omitempty"`
}

// Code returns the application error code the problem was made from: the suffix of Type, or
// the code of Status when Type is not one of hostplane's.
func (p *Problem) Code() api.Code {
	if c, ok := strings.CutPrefix(p.Type, ProblemTypeBase); ok && c != "" {
		return api.Code(c)
	}
	if c, ok := codeByStatus[p.Status]; ok {
		return c
	}
	return api.CodeInternal
}

// Err turns a problem received by a client back into an application error.
func (p *Problem) Err() *api.Error {
	return &api.Error{Code: p.Code(), Message: p.Detail, Fields: p.Errors}
}

// NewProblem builds the problem for err as r's answer. Only an *api.Error's code, Message and
// Fields reach the problem; the cause of an internal error never does.
func NewProblem(r *http.Request, err error) *Problem {
	code, msg, fields := api.CodeInternal, "", []api.FieldError(nil)
	if ae, ok := errors.AsType[*api.Error](err); ok {
		code, msg, fields = ae.Code, ae.Message, ae.Fields
	}
	// A write refused because its bucket is full says so (JetStream answers that 503 too).
	if code == api.CodeInternal && errors.Is(err, store.ErrFull) {
		code, msg, fields = api.CodeUnavailable, "the management plane's store has no room for this write; reads and deletes still work: delete what is no longer needed, or an operator raises the bucket's limit (docs/operations.md)", nil
	}
	// An internal error whose cause is NATS out of reach is that, whoever wrapped it.
	if code == api.CodeInternal && busUnavailable(r, err) {
		code, msg, fields = api.CodeUnavailable, "the management plane's message bus (NATS) is not reachable right now; retry shortly", nil
	}
	status, known := statusByCode[code]
	if !known || code == api.CodeInternal {
		code, status, fields = api.CodeInternal, http.StatusInternalServerError, nil
		msg = "an internal error occurred"
		if id := RequestID(r.Context()); id != "" {
			msg += "; quote request id " + id + " when reporting it"
		}
	}
	return &Problem{
		Type:      ProblemTypeBase + string(code),
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    msg,
		Instance:  r.URL.Path,
		Errors:    fields,
		RequestID: RequestID(r.Context()),
	}
}

// busUnavailable reports whether err is NATS being out of reach (restarting, a connection
// being re-established, a request timing out) rather than a fault of the request or of the
// daemon: the caller should retry, so it is answered 503, not 500.
func busUnavailable(r *http.Request, err error) bool {
	for _, target := range []error{
		nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrConnectionDraining,
		nats.ErrNoServers, nats.ErrTimeout, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	// JetStream answering 503 itself: its cluster has no meta or stream leader for the moment
	// (a server lost, an election under way; "JetStream system temporarily unavailable").
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok && apiErr.Code == http.StatusServiceUnavailable {
		return true
	}
	// A JetStream call that timed out while the caller still waits.
	return errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil
}

// HandlerFunc is an HTTP handler that returns an error instead of writing one.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts fn to http.HandlerFunc: a returned error is answered with WriteProblem.
func Handle(fn HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			WriteProblem(w, r, err)
		}
	}
}

// WriteProblem answers r with the problem+json form of err (see NewProblem). Errors answered
// with a 5xx status are logged with their cause and the request id; the caller sees only a
// generic detail for internal errors. If the handler already started its answer, the error is
// only logged.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	writeProblem(w, r, err, true)
}

// StatusClientClosedRequest is what the metrics and the log record for a request whose caller
// went away before its answer (nginx's 499): nobody reads the answer, and the daemon is not
// at fault.
const StatusClientClosedRequest = 499

func writeProblem(w http.ResponseWriter, r *http.Request, err error, logCause bool) {
	started := headerWritten(w)
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		LoggerFrom(r.Context()).Debug("request abandoned by its caller", "error", errString(err),
			"method", r.Method, "path", r.URL.Path, "answer_started", started)
		if !started {
			w.WriteHeader(StatusClientClosedRequest)
		}
		return
	}
	p := NewProblem(r, err)
	if logCause {
		level, msg := slog.LevelError, "request failed"
		switch {
		case p.Status == http.StatusServiceUnavailable:
			level = slog.LevelWarn
		case p.Status < 500 && !started:
			level, msg = slog.LevelDebug, "request rejected" // the caller's mistake, told to the caller
		}
		LoggerFrom(r.Context()).Log(r.Context(), level, msg,
			"error", errString(err), "status", p.Status, "method", r.Method, "path", r.URL.Path,
			"answer_started", started)
	}
	if started {
		return
	}
	body, mErr := json.Marshal(p)
	if mErr != nil { // cannot happen: Problem holds strings and ints only
		body = []byte(`{"type":"` + ProblemTypeBase + `internal","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// WriteJSON answers with v as JSON and status. If v cannot be encoded (a bug), it answers 500.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		slog.Default().Error("httpapi: cannot encode response", "error", err)
		status = http.StatusInternalServerError
		w.Header().Set("Content-Type", ContentTypeProblem)
		body = []byte(`{"type":"` + ProblemTypeBase + `internal","title":"Internal Server Error","status":500}`)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
