package httpapi

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-Id"

type (
	requestIDKey  struct{}
	loggerKey     struct{}
	routeStateKey struct{}
)

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LoggerFrom returns the router's logger with the request id of ctx, or slog.Default() outside
// a router.
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// requestID reuses the caller's X-Request-Id when it is short and printable, else makes one,
// and echoes it in the answer.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if RequestID(r.Context()) != "" { // an outer router already did
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = rand.Text()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// routeState is shared by the routers one request passes through.
type routeState struct {
	unmatched bool // the NotFound or MethodNotAllowed handler answered
	// span is the span TraceRoutes started for the request, when the router had none of its
	// own: the request log line names its trace.
	span trace.SpanContext
}

func markUnmatched(ctx context.Context) {
	if st, ok := ctx.Value(routeStateKey{}).(*routeState); ok {
		st.unmatched = true
	}
}

// instrumenter traces, logs and measures each request.
type instrumenter struct {
	daemon  string
	log     *slog.Logger
	level   slog.Level // of the request log
	metrics *httpMetrics
	tracer  trace.Tracer // nil: no spans
}

func (in *instrumenter) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := r.Context()
		st, nested := ctx.Value(routeStateKey{}).(*routeState)
		if !nested {
			st = &routeState{}
			ctx = context.WithValue(ctx, routeStateKey{}, st)
		}
		var span trace.Span
		if in.tracer != nil && !nested {
			ctx = observe.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = in.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					attribute.String("http.request.method", r.Method),
					attribute.String("url.path", r.URL.Path),
				))
		}
		log := in.log.With("request_id", RequestID(ctx))
		ctx = context.WithValue(ctx, loggerKey{}, log)

		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))

		elapsed := time.Since(start)
		route := RouteUnmatched
		if p := chi.RouteContext(r.Context()).RoutePattern(); p != "" && !st.unmatched {
			route = p
		}
		method := methodLabel(r.Method)
		in.metrics.requests.WithLabelValues(in.daemon, route, method, strconv.Itoa(rec.status)).Inc()
		in.metrics.duration.WithLabelValues(in.daemon, route, method).Observe(elapsed.Seconds())

		if span != nil {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(
				attribute.String("http.route", route),
				attribute.Int("http.response.status_code", rec.status),
			)
			if rec.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(rec.status))
			}
			span.End()
		}
		if nested {
			return // the outer router logs the request
		}
		if !trace.SpanContextFromContext(ctx).IsValid() && st.span.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, st.span)
		}
		level := in.level
		if route == PathLeaderz || rec.status < 400 && (route == PathHealthz || route == PathReadyz || route == PathMetrics) {
			level = slog.LevelDebug // probes and scrapes would drown everything else (a standby's 503 to /leaderz is expected)
		}
		log.LogAttrs(ctx, level, "http request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Duration("duration", elapsed),
			slog.Int64("bytes", rec.bytes),
		)
	})
}

// recoverer answers a panicking handler with a 500 problem and logs the panic and its stack
// once. http.ErrAbortHandler keeps its meaning: abort the answer silently.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			LoggerFrom(r.Context()).ErrorContext(r.Context(), "panic serving request",
				"panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path,
				"stack", string(debug.Stack()))
			if headerWritten(w) {
				// Too late for a problem; make the client see a broken answer, not a short one.
				panic(http.ErrAbortHandler)
			}
			writeProblem(w, r, &api.Error{Code: api.CodeInternal, Err: fmt.Errorf("%w: %v", ErrPanic, v)}, false)
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody rejects a declared-too-large body at once and caps the rest at limit bytes;
// DecodeJSON reports the cap as CodeTooLarge.
func limitBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				writeProblem(w, r, api.Errorf(api.CodeTooLarge, "request body is larger than %d bytes", limit), false)
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = http.MaxBytesReader(innermost(w), r.Body, limit)
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyLimitKey{}, limit)))
		})
	}
}

// recorder notes the status and size of an answer.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (rec *recorder) WriteHeader(code int) {
	if !rec.wroteHeader && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rec.status = code
		rec.wroteHeader = true
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers (component logs) flush through the recorder.
func (rec *recorder) Flush() {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (Hijack, deadlines, ...).
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// headerWritten reports whether the answer on w has started, as far as the recorders of the
// routers on the way can tell.
func headerWritten(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *recorder:
			return x.wroteHeader
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// innermost returns the writer under all Unwrap layers, the one net/http made; handing it to
// http.MaxBytesReader lets the server close a connection whose body was cut off.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// TraceRoutes returns a middleware that gives each request a span of provider's tracer
// provider (nil, or one returning nil: no span), named "<method> <route>". Put it on the
// routes a daemon registers on a router that is not its own (hostplane dev's front door
// serves every daemon's routes), so the request's trace shows the daemon that answered:
// within a request that already has a span the new span is its child; otherwise it is a
// server span continuing the caller's W3C trace context.
func TraceRoutes(provider func() trace.TracerProvider) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var tp trace.TracerProvider
			if provider != nil {
				tp = provider()
			}
			if tp == nil {
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			kind := trace.SpanKindInternal
			if !trace.SpanFromContext(ctx).IsRecording() {
				ctx = observe.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
				kind = trace.SpanKindServer
			}
			ctx, span := tp.Tracer("github.com/hostplane/hostplane/pkg/httpapi").Start(ctx, r.Method,
				trace.WithSpanKind(kind),
				trace.WithAttributes(
					attribute.String("http.request.method", r.Method),
					attribute.String("url.path", r.URL.Path),
				))
			defer span.End()
			if st, ok := ctx.Value(routeStateKey{}).(*routeState); ok && !st.span.IsValid() {
				st.span = span.SpanContext()
			}
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(rec, r.WithContext(ctx))
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				span.SetName(r.Method + " " + rc.RoutePattern())
				span.SetAttributes(attribute.String("http.route", rc.RoutePattern()))
			}
			span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
			if rec.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(rec.status))
			}
		})
	}
}
