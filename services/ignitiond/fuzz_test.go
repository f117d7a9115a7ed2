package ignitiond

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/release"
)

// Tokens of pool demo.workers in the fuzzed daemon: fixed, so the seeds can present them.
const (
	fuzzCurrent  = "cUrReNt-token_0123456789abcdefghijklmnopqrs"
	fuzzPrevious = "pReViOuS-token_0123456789abcdefghijklmnopqr"
)

// FuzzBearer: the Authorization header parser never panics, and a token it returns is a
// well-formed token that the header carried, after a "Bearer" scheme in any case and one space.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{
		"Bearer " + fuzzCurrent, "bearer " + fuzzCurrent, "BEARER " + fuzzCurrent, "Basic " + fuzzCurrent, "Bearer",
		"Bearer ", "Bearer  " + fuzzCurrent, "Bearer " + fuzzCurrent + "A", "Bearer " + fuzzCurrent[:42] + "=",
		"Bearer " + fuzzCurrent + "\r\n", "Bearer\t" + fuzzCurrent, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		tok, ok := bearer([]string{value})
		if _, twice := bearer([]string{value, value}); twice {
			t.Fatalf("bearer accepted two headers %q", value)
		}
		if _, r := newTokenIndex(nil).lookup("demo", tok, time.Now()); !ok {
			return
		} else if r != TokenUnknown {
			t.Fatalf("lookup of the well-formed token %q of header %q = %s, want %s", tok, value, r, TokenUnknown)
		}
		scheme, rest, _ := strings.Cut(value, " ")
		if !wellFormed(tok) || rest != tok || !strings.EqualFold(scheme, "Bearer") {
			t.Fatalf("bearer(%q) = %q", value, tok)
		}
	})
}

// fuzzDaemon is an ignitiond with only what GET /ignition needs: a synced token index with
// demo.workers' current and previous tokens, and their payloads already rendered (no NATS).
func fuzzDaemon(t *testing.T) (*Daemon, map[string][]byte) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now()) // the tokens stay valid however long the fuzzing runs
	d := &Daemon{cfg: Config{Base: daemon.Base{Clock: clk}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		metrics: m, index: newTokenIndex(nil), cache: newPayloadCache(), binaries: newNodeBinaries()}
	now := clk.Now()
	cur := mint("hash-new", "1.34.4", nil, now, time.Hour)
	cur.Token = fuzzCurrent
	prev := mint("hash-old", "1.34.4", nil, now.Add(-time.Minute), time.Hour)
	prev.Token = fuzzPrevious
	d.index.put("demo.workers", 1, &api.IgnitionTokens{Current: cur, Previous: retire(prev, now, time.Hour), NodePoolGeneration: 7})
	d.index.once.Do(func() { close(d.index.synced) })
	payloads := map[string][]byte{fuzzCurrent: []byte(`{"ignition":{"version":"3.5.0"},"new":1}`), fuzzPrevious: []byte(`{"ignition":{"version":"3.5.0"},"old":1}`)}
	for tok, hash := range map[string]string{fuzzCurrent: cur.ConfigHash, fuzzPrevious: prev.ConfigHash} {
		d.cache.put(payloadKey{cluster: "demo", nodepool: "workers", hash: hash, token: tok, generation: 7}, payloads[tok])
	}
	return d, payloads
}

// FuzzServeIgnition sends a machine's request (any path, any Authorization headers) to
// cluster demo's own listener and to the gateway's /ignition/{cluster}. Neither panics; the
// answer is never a server error; a kubelet is served only to a valid token; a payload only for exactly one Authorization
// header carrying one of demo.workers' tokens, on demo's path, and it is that token's payload;
// every refusal is a 401 with an empty body (or the router's 400, 404, 405 or redirect).
func FuzzServeIgnition(f *testing.F) {
	for _, s := range []struct{ path, auth, second string }{
		{"/ignition", "Bearer " + fuzzCurrent, ""},
		{"/ignition/demo", "Bearer " + fuzzPrevious, ""},
		{"/ignition/demo", "bearer " + fuzzCurrent, ""},
		{"/ignition/prod", "Bearer " + fuzzCurrent, ""},
		{"/ignition/d%65mo", "Bearer " + fuzzCurrent, ""},
		{"/ignition/demo/", "Bearer " + fuzzCurrent, ""},
		{"/ignition/../ignition/demo", "Bearer " + fuzzCurrent, ""},
		{"//ignition", "Bearer " + fuzzCurrent, ""},
		{"/ignition?x=1", "Bearer " + fuzzCurrent, ""},
		{"/ignition", "Bearer " + fuzzCurrent, "Bearer " + fuzzCurrent},
		{"/ignition", "Basic " + fuzzCurrent, ""},
		{"/ignition", "Bearer " + strings.ToUpper(fuzzCurrent), ""},
		{"/ignition", "", ""},
		{"/healthz", "", ""},
		{"/releases/v1.34.4/kubelet", "Bearer " + fuzzCurrent, ""},
		{"/releases/v1.34.4/kubelet", "Bearer " + strings.ToUpper(fuzzCurrent), ""},
		{"/releases/v9.9.9/kubelet", "Bearer " + fuzzPrevious, ""},
		{"/releases/v1.34.4/kube-proxy", "Bearer " + fuzzCurrent, ""},
		{"/releases/v1.34.4/kube-apiserver", "Bearer " + fuzzCurrent, ""},
		{"/releases/v1.34.4/..%2fkubelet", "Bearer " + fuzzCurrent, ""},
		{"*", "", ""},
	} {
		f.Add(s.path, s.auth, s.second)
	}
	f.Fuzz(func(t *testing.T, target, auth, second string) {
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "" || u.Host != "" {
			return // not a request line a server would hand to a handler
		}
		d, payloads := fuzzDaemon(t)
		gateway := chi.NewRouter()
		gateway.Get(PathGatewayIgnition, d.serveGatewayIgnition)
		for name, h := range map[string]struct {
			handler http.Handler
			path    string // the only path a payload is served on
		}{
			"listener": {d.handler("demo"), PathIgnition},
			"gateway":  {gateway, "/ignition/demo"},
		} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL, r.RequestURI = u, target
			for _, v := range []string{auth, second} {
				if v != "" {
					r.Header.Add("Authorization", v)
				}
			}
			w := httptest.NewRecorder()
			h.handler.ServeHTTP(w, r)
			body := w.Body.Bytes()
			switch w.Code {
			case http.StatusOK:
				if u.Path == PathHealthz && name == "listener" {
					continue
				}
				tok, ok := bearer(r.Header.Values("Authorization"))
				if _, valid := payloads[tok]; valid && name == "listener" && strings.HasPrefix(u.Path, "/releases/") &&
					slices.Contains(release.NodeBinaries(), path.Base(u.Path)) {
					continue // a release's node binary, to a valid token (when this host has built it)
				}
				if !ok || u.Path != h.path || u.RawPath != "" || !bytes.Equal(body, payloads[tok]) {
					t.Fatalf("%s: GET %q with Authorization %q: served %q", name, target, r.Header.Values("Authorization"), body)
				}
			case http.StatusUnauthorized:
				if len(body) != 0 || w.Header().Get("WWW-Authenticate") != "Bearer" {
					t.Fatalf("%s: GET %q: 401 with body %q and WWW-Authenticate %q", name, target, body, w.Header().Get("WWW-Authenticate"))
				}
			case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusMovedPermanently, http.StatusTemporaryRedirect:
			default:
				t.Fatalf("%s: GET %q: %d %q", name, target, w.Code, body)
			}
		}
	})
}
