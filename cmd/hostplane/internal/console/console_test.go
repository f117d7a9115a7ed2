package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/cmd/hostplane/internal/console"
)

func serve(t *testing.T, cfg console.Config) *httptest.Server {
	t.Helper()
	r := chi.NewRouter()
	console.Mount(r, cfg)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestMount_ServesTheEmbeddedPageWithItsOwnOriginOnly(t *testing.T) {
	srv := serve(t, console.Config{})
	tests := []struct {
		path, contentType, contains string
	}{
		{"/ui/", "text/html", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "", ""}, // FileServer redirects index.html to ./
		{"/ui/app.js", "text/javascript", "followEvents"},
		{"/ui/app.css", "text/css", ".badge"},
	}
	for _, tc := range tests {
		resp, body := get(t, srv.URL+tc.path)
		if tc.contentType == "" {
			if resp.StatusCode != http.StatusMovedPermanently {
				t.Errorf("GET %s = %d, want a redirect", tc.path, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType) || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s = %d %s (%d bytes), want 200 %s containing %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), tc.contentType, tc.contains)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q does not keep the page to its origin", tc.path, csp)
		}
	}
	// No file of the bundle loads anything from elsewhere (no CDN).
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		_, body := get(t, srv.URL+p)
		for _, bad := range []string{"src=\"http", "href=\"http", "@import", "cdn"} {
			if strings.Contains(strings.ToLower(body), bad) {
				t.Errorf("%s mentions %q: the console loads nothing from other origins", p, bad)
			}
		}
	}
	if resp, _ := get(t, srv.URL+"/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui = %d to %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, srv.URL+"/ui/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing.js = %d, want 404", resp.StatusCode)
	}
}

func TestMount_ConfigJSON_CarriesTheGrafanaURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"http://grafana:3000/", "http://grafana:3000"},
		{"https://example.com/grafana", "https://example.com/grafana"},
	} {
		srv := serve(t, console.Config{GrafanaURL: tc.in})
		resp, body := get(t, srv.URL+"/ui/config.json")
		var got struct {
			GrafanaURL string `json:"grafanaURL"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("config.json = %d %s: %v", resp.StatusCode, body, err)
		}
		if got.GrafanaURL != tc.want {
			t.Errorf("GrafanaURL %q: config.json says %q, want %q", tc.in, got.GrafanaURL, tc.want)
		}
	}
}

func TestConfig_Validate_RefusesAGrafanaURLThatIsNotHTTP(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"http://127.0.0.1:3000", true},
		{"https://grafana.example.com/sub", true},
		{"grafana:3000", false},
		{"javascript:alert(1)", false},
		{"ftp://grafana", false},
		{"http://", false},
	} {
		err := console.Config{GrafanaURL: tc.url}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
}
