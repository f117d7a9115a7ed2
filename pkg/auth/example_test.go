package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

func Example() {
	tokens, _ := auth.ParseTokens([]byte(`
- name: dashboards
  token: viewer-0123456789abcdef
  role: viewer
- name: team-a
  token: team-a-0123456789abcdef
  role: admin
  clusters: [team-a]
`))
	a, err := auth.New(auth.Config{Tokens: tokens})
	if err != nil {
		panic(err)
	}
	r := httpapi.NewRouter(httpapi.Config{Middlewares: []func(http.Handler) http.Handler{a.Middleware}})
	r.Delete("/v1/clusters/{cluster}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })

	for _, tc := range []struct{ token, cluster string }{
		{"", "team-a"},
		{"viewer-0123456789abcdef", "team-a"},
		{"team-a-0123456789abcdef", "team-b"},
		{"team-a-0123456789abcdef", "team-a"},
	} {
		req := httptest.NewRequest(http.MethodDelete, "/v1/clusters/"+tc.cluster, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(tc.cluster, w.Code)
	}
	// Output:
	// team-a 401
	// team-a 403
	// team-b 403
	// team-a 202
}
