package dev_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/clusterd"
)

// caller is one column of the access table.
type caller struct {
	name     string
	token    string // "" sends no Authorization header
	role     auth.Role
	clusters []string
	valid    bool
}

var callers = []caller{
	{name: "admin", token: "admin-0123456789abcdef", role: auth.RoleAdmin, valid: true},
	{name: "viewer", token: "viewer-0123456789abcdef", role: auth.RoleViewer, valid: true},
	{name: "viewer scoped to demo", token: "viewer-demo-0123456789abcdef", role: auth.RoleViewer, clusters: []string{"demo"}, valid: true},
	{name: "viewer scoped to another cluster", token: "viewer-other-0123456789abcdef", role: auth.RoleViewer, clusters: []string{"other"}, valid: true},
	{name: "admin scoped to another cluster", token: "admin-other-0123456789abcdef", role: auth.RoleAdmin, clusters: []string{"other"}, valid: true},
	{name: "no token"},
	{name: "bad token", token: "not-a-token-0123456789abcdef"},
}

func tableAuthenticator(t *testing.T) *auth.Authenticator {
	t.Helper()
	var tokens []auth.Token
	for _, c := range callers {
		if c.valid {
			tokens = append(tokens, auth.Token{Name: c.name, Token: c.token, Role: c.role, Clusters: c.clusters})
		}
	}
	a, err := auth.New(auth.Config{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func send(t *testing.T, method, url, token string) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPatch {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func problemCode(b []byte) api.Code {
	var p httpapi.Problem
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Code()
}

// TestFrontDoor_AccessControl_EveryRouteByRole sends every route the front door registers as
// every kind of caller. What each route needs is the document's x-required-role (the test
// of the document keeps it complete); authentication comes before routing, so it holds for
// clusters that do not exist.
func TestFrontDoor_AccessControl_EveryRouteByRole(t *testing.T) {
	r := frontDoor(t, tableAuthenticator(t))
	srv := httptest.NewServer(r)
	defer srv.Close()
	ops := operations(t, openAPIDoc(t))

	for _, route := range routes(t, r) {
		method, pattern, _ := strings.Cut(route, " ")
		op, ok := ops[route]
		if !ok {
			t.Errorf("%s: not in the OpenAPI document, so its required role is unknown", route)
			continue
		}
		required, _ := op["x-required-role"].(string)
		path := strings.NewReplacer("{cluster}", "demo", "{name}", "etcd").Replace(pattern)
		namesCluster := strings.Contains(pattern, "{cluster}")

		for _, c := range callers {
			t.Run(route+"/"+c.name, func(t *testing.T) {
				resp, body := send(t, method, srv.URL+path, c.token)
				code := resp.StatusCode
				if required == "none" {
					if code == http.StatusUnauthorized || code == http.StatusForbidden {
						t.Fatalf("open route answered %d: %s", code, body)
					}
					return
				}
				if !c.valid {
					if code != http.StatusUnauthorized || problemCode(body) != api.CodeUnauthenticated ||
						!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
						t.Fatalf("answer = %d %q %s, want 401 problem with a Bearer challenge", code, resp.Header.Get("WWW-Authenticate"), body)
					}
					return
				}
				roleOK := c.role == auth.RoleAdmin || required == "viewer"
				scopeOK := len(c.clusters) == 0
				if !scopeOK {
					if namesCluster {
						scopeOK = slices.Contains(c.clusters, "demo")
					} else {
						scopeOK = method == http.MethodGet // listing; creating needs an unscoped token
					}
				}
				if roleOK && scopeOK {
					if code == http.StatusUnauthorized || code == http.StatusForbidden {
						t.Fatalf("allowed caller answered %d: %s", code, body)
					}
					return
				}
				if code != http.StatusForbidden || problemCode(body) != api.CodeForbidden || resp.Header.Get("Content-Type") != httpapi.ContentTypeProblem {
					t.Fatalf("answer = %d %s, want a 403 problem", code, body)
				}
			})
		}
	}
}

func TestFrontDoor_UnknownRoutes_NeedATokenBeforeTheyAnswer404(t *testing.T) {
	srv := httptest.NewServer(frontDoor(t, tableAuthenticator(t)))
	defer srv.Close()
	if resp, b := send(t, http.MethodGet, srv.URL+"/v1/no-such-thing", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s, want 401", resp.StatusCode, b)
	}
	if resp, b := send(t, http.MethodGet, srv.URL+"/v1/no-such-thing", callers[0].token); resp.StatusCode != http.StatusNotFound {
		t.Errorf("with a token: %d %s, want 404", resp.StatusCode, b)
	}
}

// runClusterd runs a real clusterd on an embedded NATS until the test ends.
func runClusterd(t *testing.T) (*clusterd.Daemon, *testenv.NATSEnv) {
	t.Helper()
	n := testenv.NATS(t)
	d, err := clusterd.New(clusterd.Config{Base: daemon.Base{NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(clusterd.Name), DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clusterd: %v", err)
		}
	})
	testenv.Eventually(t, 30*time.Second, func() bool { return d.Ready(context.Background()) == nil }, "clusterd never became ready")
	return d, n
}

// A scoped token's list is filtered by clusterd.
func TestFrontDoor_ScopedToken_ListsOnlyItsClusters(t *testing.T) {
	d, _ := runClusterd(t)
	srv := httptest.NewServer(dev.Router(httpapi.Config{}, tableAuthenticator(t), d))
	defer srv.Close()

	for _, name := range []string{"demo", "other", "third"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/clusters",
			strings.NewReader(`{"name":"`+name+`","spec":{"release":{"version":"1.34.4"},"platform":{"type":"local"}}}`))
		req.Header.Set("Authorization", "Bearer "+callers[0].token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("create %s: %d", name, resp.StatusCode)
		}
	}
	list := func(token string) []string {
		resp, b := send(t, http.MethodGet, srv.URL+"/v1/clusters", token)
		var l api.ClusterList
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &l) != nil {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		var names []string
		for _, c := range l.Items {
			names = append(names, c.Name)
		}
		return names
	}
	if got := list(callers[0].token); !slices.Equal(got, []string{"demo", "other", "third"}) {
		t.Errorf("admin lists %v", got)
	}
	if got := list(callers[2].token); !slices.Equal(got, []string{"demo"}) {
		t.Errorf("viewer scoped to demo lists %v, want [demo]", got)
	}
	if got := list(callers[3].token); !slices.Equal(got, []string{"other"}) {
		t.Errorf("viewer scoped to other lists %v, want [other]", got)
	}
}

// The event stream is long-lived: it must flow through the front door's middleware (request
// log, metrics, access control) as it happens.
func TestFrontDoor_EventStream_DeliversEventsThroughTheMiddleware(t *testing.T) {
	d, n := runClusterd(t)
	srv := httptest.NewServer(dev.Router(httpapi.Config{Name: "frontdoor"}, tableAuthenticator(t), d))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/clusters/demo/events", nil)
	req.Header.Set("Authorization", "Bearer "+callers[2].token) // viewer scoped to demo
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != clusterd.ContentTypeEventStream {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ev, err := bus.NewPublisher(n.JS, "test").Publish(context.Background(), "demo", events.ResourceNodePool, "updated", "demo/workers", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				got <- id
				return
			}
		}
		close(got)
	}()
	select {
	case id := <-got:
		if id != ev.ID {
			t.Fatalf("streamed id %q, want %q", id, ev.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event through the front door within 30s")
	}
}

func TestDev_AdminToken_IsGeneratedOnceIntoTheDataDirWithMode0600(t *testing.T) {
	t.Setenv(auth.EnvAdminToken, "")
	t.Setenv(auth.EnvTokensFile, "")
	dir := t.TempDir()
	start := func() *dev.Stack {
		s, err := dev.Start(context.Background(), dev.Config{DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1,
			NoManagementAPIServer: true, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	token := s.AdminToken()
	s.Stop(context.Background())
	fi, err := os.Stat(filepath.Join(dir, dev.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode = %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(filepath.Join(dir, dev.AdminTokenFile))
	if len(token) < auth.MinTokenLength || strings.TrimSpace(string(b)) != token {
		t.Fatalf("token %q, file %q", token, b)
	}

	s = start()
	defer s.Stop(context.Background())
	if s.AdminToken() != token {
		t.Errorf("restart made a new token")
	}
	if resp, b := send(t, http.MethodGet, s.URL()+"/v1/clusters", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", resp.StatusCode, b)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, _ := send(t, http.MethodGet, s.URL()+"/v1/clusters", token)
		return resp.StatusCode == http.StatusOK
	}, "the admin token is never accepted")
}

func TestDev_AdminToken_FromTheEnvironmentWins(t *testing.T) {
	t.Setenv(auth.EnvAdminToken, "env-token-0123456789abcdef")
	dir := t.TempDir()
	s, err := dev.Start(context.Background(), dev.Config{DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1,
		NoManagementAPIServer: true, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if s.AdminToken() != "env-token-0123456789abcdef" {
		t.Errorf("AdminToken = %q", s.AdminToken())
	}
	if _, err := os.Stat(filepath.Join(dir, dev.AdminTokenFile)); !os.IsNotExist(err) {
		t.Errorf("admin-token file written although the environment gave one: %v", err)
	}
}
