package daemon_test

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/auth/authtest"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestStandaloneDaemon_WithoutTokens_RefusesToStartUnlessInsecureNoAuth(t *testing.T) {
	t.Setenv(auth.EnvAdminToken, "")
	t.Setenv(auth.EnvTokensFile, "")
	build := func(args ...string) error {
		fs := flag.NewFlagSet("testd", flag.ContinueOnError)
		base := daemon.Flags(fs, "testd")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := daemon.New(*base, daemon.Spec{Name: "testd"})
		return err
	}
	if err := build(); !errors.Is(err, daemon.ErrNoTokens) {
		t.Errorf("no tokens: err = %v, want ErrNoTokens", err)
	}
	if err := build("--insecure-no-auth"); err != nil {
		t.Errorf("--insecure-no-auth: %v", err)
	}
	if err := build("--addr", ""); err != nil {
		t.Errorf("no admin port: %v", err)
	}
	t.Setenv(auth.EnvAdminToken, "short")
	if err := build(); !errors.Is(err, auth.ErrBadToken) {
		t.Errorf("a too short admin token: err = %v, want ErrBadToken", err)
	}
}

func TestDaemon_AdminRouter_WithAnAdminToken_GuardsRoutesAndServesOpenAPIOpenly(t *testing.T) {
	const token = "admin-0123456789abcdef"
	base := "http://" + thingDaemon(t, daemon.Base{AdminToken: token})

	get := func(path, tok string) int { return authtest.Status(t, http.MethodGet, base+path, tok) }
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/openapi.json", "", http.StatusOK},
		{"/metrics", "", http.StatusOK},
		{"/v1/clusters/demo/thing", "", http.StatusUnauthorized},
		{"/v1/clusters/demo/thing", "wrong-0123456789abcdef", http.StatusUnauthorized},
		{"/v1/clusters/demo/thing", token, http.StatusOK},
	} {
		if got := get(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s (token %q) = %d, want %d", tc.path, tc.token, got, tc.want)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return get("/readyz", "") == http.StatusOK }, "/readyz never open and ready")
}

func TestDaemon_AdminRouter_ATokenRemovedFromTheTokensFileIsRefusedWithoutARestart(t *testing.T) {
	const (
		admin  = "admin-0123456789abcdef"
		viewer = "viewer-0123456789abcdef"
		later  = "later-0123456789abcdef"
	)
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens := func(doc string) {
		t.Helper()
		if err := atomicfile.Write(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("- {name: ci, token: " + viewer + ", role: viewer}\n")
	base := "http://" + thingDaemon(t, daemon.Base{AdminToken: admin, TokensFile: file})
	get := func(tok string) int { return authtest.Status(t, http.MethodGet, base+"/v1/clusters/demo/thing", tok) }
	want := func(step string, codes map[string]int) {
		t.Helper()
		for tok, code := range codes {
			if got := get(tok); got != code {
				t.Errorf("%s: token %s… = %d, want %d", step, tok[:6], got, code)
			}
		}
	}
	want("at start", map[string]int{viewer: 200, admin: 200, later: 401})

	// The operator revokes ci and adds another: no restart.
	writeTokens("- {name: later, token: " + later + ", role: viewer}\n")
	want("after the file changed", map[string]int{viewer: 401, admin: 200, later: 200})

	// A typo keeps the tokens in effect (a broken file never opens or locks the API).
	writeTokens("- {name: typo, token: " + viewer + ", role: viewer, cluster: [demo]}\n")
	want("after a file that does not parse", map[string]int{viewer: 401, admin: 200, later: 200})
	writeTokens("[]\n")
	want("after a file with no token (the admin token stays)", map[string]int{viewer: 401, admin: 200, later: 401})
}

// thingDaemon runs a daemon with base's access control and one route,
// GET /v1/clusters/{cluster}/thing, on a fresh NATS server; it returns the admin port's
// address (host:port).
func thingDaemon(t *testing.T, base daemon.Base) string {
	t.Helper()
	n := testenv.NATS(t)
	base.NATSURL, base.NATSNKeyFile, base.DataDir, base.AdminAddr = n.Server.URL(), n.SeedFile(natsauth.Admin), t.TempDir(), "127.0.0.1:0"
	base.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := daemon.New(base, daemon.Spec{Name: "testd", Routes: func(r chi.Router) {
		r.Get("/v1/clusters/{cluster}/thing", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	addr := d.AdminAddr(actx)
	// Ready (its setup done), so that the test's end stops a running daemon, not its setup.
	scheme := "http://"
	if base.AdminTLS.Enabled() {
		scheme = "https://"
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a probe of the test's own daemon
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := hc.Get(scheme + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the daemon never became ready")
	return addr
}

// A standalone daemon (Flags) serves /metrics, whose series name every cluster, to a token
// only; the metrics token reads /metrics and nothing else; HOSTPLANE_METRICS_REQUIRE_AUTH=false
// opens it again.
func TestStandaloneDaemon_ServesMetricsOnlyToAToken(t *testing.T) {
	const admin = "admin-0123456789abcdef"
	metricsToken := auth.GenerateToken()
	file := filepath.Join(t.TempDir(), "metrics.token")
	if err := atomicfile.Write(file, []byte(metricsToken+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv(auth.EnvAdminToken, admin)
	t.Setenv(auth.EnvTokensFile, "")
	t.Setenv(daemon.EnvMetricsTokenFile, file)
	flags := func() daemon.Base {
		fs := flag.NewFlagSet("testd", flag.ContinueOnError)
		base := daemon.Flags(fs, "testd")
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		return *base
	}
	t.Setenv(daemon.EnvMetricsRequireAuth, "")
	base := "http://" + thingDaemon(t, flags())
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", metricsToken, http.StatusOK},
		{"/metrics", admin, http.StatusOK},
		{"/v1/clusters/demo/thing", metricsToken, http.StatusForbidden},
		{"/healthz", "", http.StatusOK},
	} {
		if got := authtest.Status(t, http.MethodGet, base+tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s (token %t) = %d, want %d", tc.path, tc.token != "", got, tc.want)
		}
	}

	t.Setenv(daemon.EnvMetricsRequireAuth, "false")
	open := "http://" + thingDaemon(t, flags())
	if got := authtest.Status(t, http.MethodGet, open+"/metrics", ""); got != http.StatusOK {
		t.Errorf("with %s=false, GET /metrics without a token = %d, want 200", daemon.EnvMetricsRequireAuth, got)
	}
}
