// Package authtest serves routes behind pkg/auth in tests, as a daemon does.
package authtest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// Server serves the routes routes adds behind pkg/auth's middleware with tokens, as a
// daemon does, on an HTTP server closed at cleanup; it returns the server's URL.
func Server(t testing.TB, routes func(chi.Router), tokens ...auth.Token) string {
	t.Helper()
	a, err := auth.New(auth.Config{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	router := httpapi.NewRouter(httpapi.Config{Name: "test", Middlewares: []func(http.Handler) http.Handler{a.Middleware}})
	routes(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Status sends method to url with token as its bearer token ("": none) and returns the
// answer's status code; a request that gets no answer fails the test.
func Status(t testing.TB, method, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
