package daemon_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/auth"
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
	n := testenv.NATS(t)
	const token = "admin-0123456789abcdef"
	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), AdminAddr: "127.0.0.1:0", AdminToken: token,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, daemon.Spec{Name: "testd", Routes: func(r chi.Router) {
		r.Get("/v1/clusters/{cluster}/thing", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	base := "http://" + d.AdminAddr(actx)

	get := func(path, tok string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
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
