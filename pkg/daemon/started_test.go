package daemon_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/daemon"
)

// A route registered through Started answers 503 (problem+json) until Run set the daemon up;
// one registered without it answers at once.
func TestDaemon_Started_AnswersUnavailableUntilSetUp(t *testing.T) {
	var d *daemon.Daemon
	d, err := daemon.New(daemon.Base{Logger: slog.New(slog.DiscardHandler)}, daemon.Spec{Name: "testd", Routes: func(r chi.Router) {
		r.Get("/v1/open", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
		r.With(d.Started).Get("/v1/guarded", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}})
	if err != nil {
		t.Fatal(err)
	}
	router := chi.NewRouter()
	d.Routes(router)
	for path, want := range map[string]int{"/v1/open": http.StatusOK, "/v1/guarded": http.StatusServiceUnavailable} {
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s before Run = %d %s, want %d", path, rec.Code, rec.Body, want)
		}
		if want == http.StatusServiceUnavailable && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s: Content-Type %q, want application/problem+json", path, rec.Header().Get("Content-Type"))
		}
	}
}
