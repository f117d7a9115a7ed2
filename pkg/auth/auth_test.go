package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

func TestParseTokens_ReadsYAMLAndJSONStrictly(t *testing.T) {
	yamlDoc := `
- name: ci
  token: viewer-0123456789abcdef
  role: viewer
  clusters: [demo, prod]
- token: admin-0123456789abcdef
  role: admin
`
	jsonDoc := `[{"name":"ci","token":"viewer-0123456789abcdef","role":"viewer","clusters":["demo","prod"]},{"token":"admin-0123456789abcdef","role":"admin"}]`
	for name, doc := range map[string]string{"yaml": yamlDoc, "json": jsonDoc} {
		tokens, err := auth.ParseTokens([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(tokens) != 2 || tokens[0].Name != "ci" || tokens[0].Role != auth.RoleViewer ||
			strings.Join(tokens[0].Clusters, ",") != "demo,prod" || tokens[1].Role != auth.RoleAdmin {
			t.Errorf("%s: tokens = %+v", name, tokens)
		}
	}
	for name, doc := range map[string]string{
		"a typo widens nothing": "- token: viewer-0123456789abcdef\n  role: viewer\n  cluster: [demo]\n",
		"not a list":            "token: x\n",
		"not YAML":              "- [",
	} {
		if _, err := auth.ParseTokens([]byte(doc)); !errors.Is(err, auth.ErrBadToken) {
			t.Errorf("%s: err = %v, want ErrBadToken", name, err)
		}
	}
}

func TestNew_RefusesBadTokens(t *testing.T) {
	good := auth.Token{Token: "admin-0123456789abcdef", Role: auth.RoleAdmin}
	for name, tokens := range map[string][]auth.Token{
		"too short":    {{Token: "short", Role: auth.RoleAdmin}},
		"with a space": {{Token: "admin 0123456789abcdef", Role: auth.RoleAdmin}},
		"unknown role": {{Token: "x-0123456789abcdef", Role: "root"}},
		"no role":      {{Token: "x-0123456789abcdef"}},
		"bad cluster":  {{Token: "x-0123456789abcdef", Role: auth.RoleViewer, Clusters: []string{"Demo"}}},
		"duplicate":    {good, {Name: "again", Token: good.Token, Role: auth.RoleViewer}},
		"bad grant":    {{Token: "x-0123456789abcdef", Role: auth.RoleViewer, Grants: []auth.Grant{"secrets"}}},
	} {
		if _, err := auth.New(auth.Config{Tokens: tokens}); !errors.Is(err, auth.ErrBadToken) {
			t.Errorf("%s: err = %v, want ErrBadToken", name, err)
		}
	}
	if _, err := auth.New(auth.Config{}); !errors.Is(err, auth.ErrNoTokens) {
		t.Errorf("no tokens: err = %v, want ErrNoTokens", err)
	}
}

func TestLoad_TokensFileAndAdminTokenTogether(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("- {token: viewer-0123456789abcdef, role: viewer}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(auth.EnvTokensFile, path)
	t.Setenv(auth.EnvAdminToken, "admin-0123456789abcdef")
	a, err := auth.FromEnv(false)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := a.Authenticate("viewer-0123456789abcdef"); !ok || p.Role != auth.RoleViewer {
		t.Errorf("viewer: %+v %v", p, ok)
	}
	if p, ok := a.Authenticate("admin-0123456789abcdef"); !ok || p.Role != auth.RoleAdmin || p.Name != auth.AdminTokenName {
		t.Errorf("admin: %+v %v", p, ok)
	}
	for _, bad := range []string{"", "admin-0123456789abcde", "admin-0123456789abcdefg", "ADMIN-0123456789ABCDEF"} {
		if _, ok := a.Authenticate(bad); ok {
			t.Errorf("%q authenticated", bad)
		}
	}
	t.Setenv(auth.EnvTokensFile, "")
	t.Setenv(auth.EnvAdminToken, "")
	if a, err := auth.FromEnv(false); a != nil || err != nil {
		t.Errorf("nothing set: %v, %v; want nil, nil", a, err)
	}
	t.Setenv(auth.EnvTokensFile, filepath.Join(t.TempDir(), "missing.yaml"))
	if _, err := auth.FromEnv(false); err == nil {
		t.Error("a missing tokens file is not an error")
	}
}

func TestAuthorize_RoleAndScope(t *testing.T) {
	admin := &auth.Principal{Name: "a", Role: auth.RoleAdmin}
	viewer := &auth.Principal{Name: "v", Role: auth.RoleViewer}
	scopedAdmin := &auth.Principal{Name: "sa", Role: auth.RoleAdmin, Clusters: []string{"demo"}}
	scopedViewer := &auth.Principal{Name: "sv", Role: auth.RoleViewer, Clusters: []string{"demo"}}
	logsViewer := &auth.Principal{Name: "lv", Role: auth.RoleViewer, Grants: []auth.Grant{auth.GrantLogs}}
	metrics := &auth.Principal{Name: "prometheus", Role: auth.RoleMetrics}
	tests := []struct {
		p            *auth.Principal
		method, path string
		allowed      bool
	}{
		{admin, "POST", "/v1/clusters", true},
		{admin, "GET", "/v1/clusters/x/kubeconfig", true},
		{viewer, "GET", "/v1/clusters", true},
		{viewer, "HEAD", "/v1/clusters/x", true},
		{viewer, "POST", "/v1/clusters", false},
		{viewer, "DELETE", "/v1/clusters/x", false},
		{viewer, "GET", "/v1/clusters/x/kubeconfig", false},
		{viewer, "GET", "/v1/clusters/x/nodepools/metal/userdata", false},
		{viewer, "GET", "/v1/clusters/x/nodepools/metal", true},
		{admin, "GET", "/v1/clusters/x/nodepools/metal/userdata", true},
		{viewer, "GET", "/v1/clusters/x/pki", false},
		{viewer, "GET", "/v1/clusters/x/pki/anything/below", false},
		{viewer, "GET", "/v1/clusters/x/events", true},
		{viewer, "GET", "/v1/clusters/x/audit", false},
		{admin, "GET", "/v1/clusters/x/audit", true},
		{scopedAdmin, "GET", "/v1/clusters/demo/audit", true},
		{scopedAdmin, "GET", "/v1/clusters/other/audit", false},
		{scopedViewer, "GET", "/v1/clusters/demo", true},
		{scopedViewer, "GET", "/v1/clusters/demo/components", true},
		{scopedViewer, "GET", "/v1/clusters/other", false},
		{scopedViewer, "GET", "/v1/clusters", true},
		{scopedAdmin, "PATCH", "/v1/clusters/demo", true},
		{scopedAdmin, "GET", "/v1/clusters/demo/kubeconfig", true},
		{scopedAdmin, "DELETE", "/v1/clusters/other", false},
		{scopedAdmin, "POST", "/v1/clusters", false},
		{scopedAdmin, "GET", "/v1/clusters/de%6Do", false}, // an escaped name is not the scope's
		// Component logs need role admin or grant logs.
		{viewer, "GET", "/v1/clusters/x/components/kube-apiserver/logs", false},
		{scopedViewer, "GET", "/v1/clusters/demo/components/etcd/logs", false},
		{logsViewer, "GET", "/v1/clusters/x/components/kube-apiserver/logs", true},
		{admin, "GET", "/v1/clusters/x/components/kube-apiserver/logs", true},
		// Role metrics reads /metrics and nothing else.
		{metrics, "GET", "/metrics", true},
		{metrics, "HEAD", "/metrics", true},
		{metrics, "POST", "/metrics", false},
		{metrics, "GET", "/v1/clusters", false},
		{metrics, "GET", "/v1/clusters/x", false},
		{viewer, "GET", "/metrics", true},
		{admin, "GET", "/metrics", true},
	}
	for _, tc := range tests {
		err := auth.Authorize(tc.p, tc.method, tc.path)
		if (err == nil) != tc.allowed {
			t.Errorf("%s %s %s: err = %v, allowed want %v", tc.p.Name, tc.method, tc.path, err, tc.allowed)
		}
		if err != nil && api.ErrorCode(err) != api.CodeForbidden {
			t.Errorf("%s %s %s: code %s, want forbidden", tc.p.Name, tc.method, tc.path, api.ErrorCode(err))
		}
	}
}

func router(t *testing.T, cfg auth.Config) *httptest.Server {
	t.Helper()
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := httpapi.NewRouter(httpapi.Config{OpenAPI: []byte("{}"), Middlewares: []func(http.Handler) http.Handler{a.Middleware}})
	r.Get("/v1/clusters/{cluster}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok || !auth.Allowed(r.Context(), chi.URLParam(r, "cluster")) {
			t.Errorf("handler without principal in scope")
		}
		_, _ = w.Write([]byte(p.Name))
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, authz string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestMiddleware_ChallengesAndOpenPaths(t *testing.T) {
	const tok = "viewer-0123456789abcdef"
	srv := router(t, auth.Config{Tokens: []auth.Token{{Name: "v", Token: tok, Role: auth.RoleViewer}}})
	tests := []struct {
		path, authz string
		status      int
		challenge   string
	}{
		{"/healthz", "", 200, ""},
		{"/readyz", "", 200, ""},
		{"/openapi.json", "", 200, ""},
		{"/metrics", "", 200, ""},
		{"/v1/clusters/demo", "", 401, `Bearer realm="hostplane"`},
		{"/v1/clusters/demo", "Basic dXNlcjpwYXNz", 401, `Bearer realm="hostplane"`},
		{"/v1/clusters/demo", "Bearer ", 401, `Bearer realm="hostplane"`},
		{"/v1/clusters/demo", "Bearer nope-0123456789abcdef", 401, `Bearer realm="hostplane", error="invalid_token"`},
		{"/v1/clusters/demo", "Bearer " + tok, 200, ""},
		{"/v1/clusters/demo", "bearer " + tok, 200, ""},
		{"/nowhere", "", 401, `Bearer realm="hostplane"`},
		// The console's files are open (this router serves none, so: not found, unchallenged);
		// a path that only starts with the same letters is not.
		{"/ui", "", 404, ""},
		{"/ui/app.js", "", 404, ""},
		{"/uix", "", 401, `Bearer realm="hostplane"`},
		{"/nowhere", "Bearer " + tok, 404, ""},
	}
	for _, tc := range tests {
		resp := get(t, srv.URL+tc.path, tc.authz)
		if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("GET %s (%q) = %d %q, want %d %q", tc.path, tc.authz, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.status, tc.challenge)
		}
		if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != httpapi.ContentTypeProblem {
			t.Errorf("GET %s: error answer is %s, not a problem", tc.path, resp.Header.Get("Content-Type"))
		}
	}
}

func TestMiddleware_MetricsRequireAuth_NeedsAnyValidToken(t *testing.T) {
	const tok = "viewer-0123456789abcdef"
	srv := router(t, auth.Config{MetricsRequireAuth: true, Tokens: []auth.Token{{Token: tok, Role: auth.RoleViewer, Clusters: []string{"demo"}}}})
	if s := get(t, srv.URL+"/metrics", "").StatusCode; s != 401 {
		t.Errorf("without a token: %d", s)
	}
	if s := get(t, srv.URL+"/metrics", "Bearer "+tok).StatusCode; s != 200 {
		t.Errorf("scoped viewer: %d", s)
	}
	if s := get(t, srv.URL+"/healthz", "").StatusCode; s != 200 {
		t.Errorf("/healthz: %d", s)
	}
}

func TestAllowed_WithoutAPrincipalAllowsEverything(t *testing.T) {
	if !auth.Allowed(context.Background(), "demo") {
		t.Error("no principal: not allowed")
	}
	ctx := auth.NewContext(context.Background(), &auth.Principal{Role: auth.RoleViewer, Clusters: []string{"demo"}})
	if !auth.Allowed(ctx, "demo") || auth.Allowed(ctx, "other") {
		t.Error("scoped principal: wrong scope")
	}
}

func TestNew_ATokensFileLeftWithoutATokenKeepsTheTokensInEffect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("- {token: viewer-0123456789abcdef, role: viewer}\n")
	var logs strings.Builder
	a, err := auth.New(auth.Config{TokensFile: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	write("[]\n")
	if _, ok := a.Authenticate("viewer-0123456789abcdef"); !ok {
		t.Error("an emptied tokens file left the API with no token at all")
	}
	if !strings.Contains(logs.String(), "no tokens configured") {
		t.Errorf("the log does not say why the file was not taken: %q", logs.String())
	}
	write("- {token: short, role: viewer}\n")
	if _, ok := a.Authenticate("viewer-0123456789abcdef"); !ok {
		t.Error("a file with a bad token entry was taken")
	}
	if _, err := auth.New(auth.Config{TokensFile: path}); !errors.Is(err, auth.ErrBadToken) || !strings.Contains(err.Error(), path) {
		t.Errorf("New with a bad tokens file: %v, want ErrBadToken naming the file", err)
	}
}
