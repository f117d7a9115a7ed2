package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/observe"
)

type cluster struct {
	Name string `json:"name"`
	Spec struct {
		Release struct {
			Version string `json:"version"`
		} `json:"release"`
	} `json:"spec"`
}

// A daemon's router: its routes under /v1 return errors, which answer as problem+json.
func Example() {
	r := httpapi.NewRouter(httpapi.Config{
		Name:     "clusterd",
		Logger:   slog.New(slog.DiscardHandler),
		Registry: observe.NewRegistry(),
	})
	r.Route("/v1/clusters", func(r chi.Router) {
		r.Post("/", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			var c cluster
			if err := httpapi.DecodeJSON(r, &c); err != nil {
				return err
			}
			if c.Spec.Release.Version == "" {
				var fe api.FieldErrors
				fe.Add("spec.release.version", "is required")
				return fe.Err()
			}
			httpapi.WriteJSON(w, http.StatusAccepted, c)
			return nil
		}))
	})

	ctx, cancel := context.WithCancel(context.Background())
	srv := httpapi.NewServer("127.0.0.1:0", r, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()

	for _, body := range []string{
		`{"name":"demo","spec":{"release":{"version":"1.34.4"}}}`,
		`{"name":"demo","spec":{}}`,
		`{"name":"demo","spec":{"relase":{}}}`,
	} {
		res, err := http.Post("http://"+srv.Addr()+"/v1/clusters", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(res.StatusCode, res.Header.Get("Content-Type"), strings.TrimSpace(stripRequestID(string(b))))
	}
	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// 202 application/json {"name":"demo","spec":{"release":{"version":"1.34.4"}}}
	// 400 application/problem+json {"type":"https://hostplane.dev/problems/invalid","title":"Bad Request","status":400,"detail":"the request has invalid fields","instance":"/v1/clusters","errors":[{"field":"spec.release.version","detail":"is required"}]}
	// 400 application/problem+json {"type":"https://hostplane.dev/problems/invalid","title":"Bad Request","status":400,"detail":"unknown field \"spec.relase\"","instance":"/v1/clusters","errors":[{"field":"spec.relase","detail":"unknown field"}]}
	// stopped: <nil>
}

// stripRequestID drops the random requestId member so the output is stable.
func stripRequestID(s string) string {
	if i := strings.Index(s, `,"requestId":`); i >= 0 {
		return s[:i] + "}"
	}
	return s
}
