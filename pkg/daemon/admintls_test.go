package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestDaemon_AdminTLSWithAClientCA_RefusesAPICallsThatBypassTheGateway_KeepsProbesOpen(t *testing.T) {
	n := testenv.NATS(t)
	const token = "admin-0123456789abcdef"
	files, err := mtls.Generate(t.TempDir(), []string{"testd"}, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), AdminAddr: "127.0.0.1:0", AdminToken: token,
		AdminTLS: files.Server("testd"),
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, daemon.Spec{Name: "testd", Routes: func(r chi.Router) {
		r.Get("/v1/clusters/{cluster}/thing", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	base := "https://" + d.AdminAddr(actx)

	client := func(c mtls.ClientConfig) *http.Client {
		tr, err := c.Transport()
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	gateway, direct := client(files.Gateway()), client(mtls.ClientConfig{CAFile: files.CAFile()})
	get := func(c *http.Client, path, tok string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		token  string
		want   int
	}{
		{"direct, admin token", direct, "/v1/clusters/demo/thing", token, http.StatusForbidden},
		{"direct, unknown path", direct, "/v1/nothing", token, http.StatusForbidden},
		{"direct /healthz", direct, "/healthz", "", http.StatusOK},
		{"direct /metrics", direct, "/metrics", "", http.StatusOK},
		{"gateway, admin token", gateway, "/v1/clusters/demo/thing", token, http.StatusOK},
		{"gateway, no token", gateway, "/v1/clusters/demo/thing", "", http.StatusUnauthorized},
	} {
		if got := get(tc.client, tc.path, tc.token); got != tc.want {
			t.Errorf("%s: GET %s = %d, want %d", tc.name, tc.path, got, tc.want)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return get(direct, "/readyz", "") == http.StatusOK }, "/readyz never ready without a client certificate")
	// Plain HTTP gets Go's TLS server's 400 ("client sent an HTTP request to an HTTPS server").
	if resp, err := http.Get("http://" + d.AdminAddr(actx) + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP /healthz = %d, want 400: the admin port serves HTTPS only", resp.StatusCode)
		}
	}
}
