package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/cmd/hostplane/gateway"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// TestGateway_OverMutualTLS_ReachesADaemonThatRefusesDirectCalls runs a real daemon (named
// pkid, serving pkid's route) with its admin port on HTTPS and the management CA as client
// CA: a call straight to it is refused, the same call through the gateway, which presents its
// client certificate, is answered, and the gateway's /readyz probes it over TLS.
func TestGateway_OverMutualTLS_ReachesADaemonThatRefusesDirectCalls(t *testing.T) {
	n := testenv.NATS(t)
	const token = "admin-0123456789abcdef"
	files, err := mtls.Generate(t.TempDir(), []string{"pkid"}, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Base{
		NATSURL: n.Server.URL(), NATSNKeyFile: n.SeedFile(natsauth.Admin), DataDir: t.TempDir(), AdminAddr: "127.0.0.1:0", AdminToken: token,
		AdminTLS: files.Server("pkid"), Logger: slog.New(slog.DiscardHandler),
	}, daemon.Spec{Name: "pkid", Routes: func(r chi.Router) {
		r.Get("/v1/clusters/{cluster}/pki", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"cluster":"demo"}`) })
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	pkid := "https://" + d.AdminAddr(actx)

	bs := backends(t)
	bs["pkid"] = pkid
	h, err := gateway.New(gateway.Config{Backends: bs, BackendTLS: files.Gateway()})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()

	get := func(c *http.Client, url string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	direct, err := mtls.ClientConfig{CAFile: files.CAFile()}.Transport()
	if err != nil {
		t.Fatal(err)
	}
	if code := get(&http.Client{Transport: direct}, pkid+"/v1/clusters/demo/pki"); code != http.StatusForbidden {
		t.Errorf("straight to the daemon: %d, want 403", code)
	}
	if code := get(http.DefaultClient, gw.URL+"/v1/clusters/demo/pki"); code != http.StatusOK {
		t.Errorf("through the gateway: %d, want 200", code)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get(gw.URL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable && // the other backends are not started
			containsOK(string(b), "pkid")
	}, "the gateway never saw the TLS daemon ready")

	// Without the client certificate, the gateway is refused like anyone else.
	h2, err := gateway.New(gateway.Config{Backends: bs, BackendTLS: mtls.ClientConfig{CAFile: files.CAFile()}})
	if err != nil {
		t.Fatal(err)
	}
	gw2 := httptest.NewServer(h2)
	defer gw2.Close()
	if code := get(http.DefaultClient, gw2.URL+"/v1/clusters/demo/pki"); code != http.StatusForbidden {
		t.Errorf("through a gateway without the client certificate: %d, want 403", code)
	}
}

// containsOK reports whether the gateway's /healthz body says daemon is ready.
func containsOK(body, daemon string) bool {
	return regexp.MustCompile(`"` + daemon + `":"ready`).MatchString(body)
}
