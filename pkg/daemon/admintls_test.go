package daemon_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestDaemon_AdminTLSWithAClientCA_RefusesAPICallsThatBypassTheGateway_KeepsProbesOpen(t *testing.T) {
	const token = "admin-0123456789abcdef"
	files, err := mtls.Generate(t.TempDir(), []string{"testd"}, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	addr := thingDaemon(t, daemon.Base{AdminToken: token, AdminTLS: files.Server("testd")})
	base := "https://" + addr

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
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP /healthz = %d, want 400: the admin port serves HTTPS only", resp.StatusCode)
		}
	}
}
