package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/cmd/hostplane/gateway"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// backends serves each of the six real daemons' admin routers (not started: their API
// handlers answer 503 "<daemon> is starting", which names who answered) on its own port.
func backends(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	ds, err := dev.Daemons(func() daemon.Base {
		return daemon.Base{NATSURL: "nats://127.0.0.1:1", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range ds {
		r := httpapi.NewRouter(httpapi.Config{Name: d.Name(), Ready: d.Ready, Leads: d.Ready})
		d.Routes(r)
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		out[d.Name()] = srv.URL
	}
	return out
}

func problem(t *testing.T, resp *http.Response) httpapi.Problem {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p httpapi.Problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: not a problem: %s", resp.Request.URL.Path, b)
	}
	return p
}

func TestGateway_RoutesEveryOperationToTheDaemonThatOwnsIt(t *testing.T) {
	h, err := gateway.New(gateway.Config{Backends: backends(t)})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	routes, err := api.Routes()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Owner == "ignitiond" {
			continue // checked below: it answers a machine, not with a problem
		}
		path := strings.NewReplacer("{cluster}", "c1", "{nodepool}", "np", "{machine}", "m", "{name}", "etcd").Replace(r.Pattern)
		req, _ := http.NewRequest(r.Method, gw.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p := problem(t, resp)
		if strings.HasSuffix(r.Pattern, "/logs") { // componentd reads logs from its data dir, started or not
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(p.Detail, "no log of etcd") {
				t.Errorf("%s %s: %d %q, want componentd's 404", r.Method, path, resp.StatusCode, p.Detail)
			}
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(p.Detail, r.Owner+" is starting") {
			t.Errorf("%s %s: %d %q, want %s's 503 'is starting'", r.Method, path, resp.StatusCode, p.Detail, r.Owner)
		}
	}
	resp, err := http.Get(gw.URL + "/ignition/c1")
	if err != nil {
		t.Fatal(err)
	}
	if p := problem(t, resp); !strings.Contains(p.Detail, "ignitiond is starting") {
		t.Errorf("GET /ignition/c1 reached %q, want ignitiond", p.Detail)
	}
}

func TestGateway_AnswersItsOwnEndpointsAndA503WhenADaemonIsDown(t *testing.T) {
	b := backends(t)
	down := httptest.NewServer(http.NotFoundHandler())
	b["pkid"] = down.URL
	down.Close() // nothing listens there any more
	h, err := gateway.New(gateway.Config{Backends: b})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()

	resp, err := http.Get(gw.URL + "/v1/clusters/c1/pki")
	if err != nil {
		t.Fatal(err)
	}
	if p := problem(t, resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "pkid is not reachable") {
		t.Errorf("pki with pkid down: %d %q", resp.StatusCode, p.Detail)
	}
	resp, err = http.Get(gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b2), "pkid") {
		t.Errorf("/readyz with the daemons not ready = %d %s", resp.StatusCode, b2)
	}
	resp, err = http.Get(gw.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(doc) != string(api.OpenAPI()) {
		t.Errorf("/openapi.json = %d (%d bytes)", resp.StatusCode, len(doc))
	}
	resp, err = http.Get(gw.URL + "/v1/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	if p := problem(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/v1/nowhere = %d %q, want 404", resp.StatusCode, p.Detail)
	}
}

func TestGateway_RefusesAConfigurationThatLeavesADaemonUnrouted(t *testing.T) {
	b := backends(t)
	delete(b, "nodepoold")
	b["infrad"] = "ftp://nowhere"
	b["dnsd"] = "http://127.0.0.1:1"
	_, err := gateway.New(gateway.Config{Backends: b})
	if !errors.Is(err, gateway.ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	for _, want := range []string{"no backend URL for nodepoold", "backend URL of infrad", `backend "dnsd" owns no route`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestGateway_ServesTheWebConsoleItself(t *testing.T) {
	h, err := gateway.New(gateway.Config{Backends: backends(t), GrafanaURL: "http://grafana:3000"})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	for path, want := range map[string]string{
		"/ui/":            "<title>Hostplane console</title>",
		"/ui/config.json": `"grafanaURL":"http://grafana:3000"`,
	} {
		resp, err := http.Get(gw.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s = %d %q, want 200 with %q", path, resp.StatusCode, b, want)
		}
	}
	if _, err := gateway.New(gateway.Config{Backends: backends(t), GrafanaURL: "grafana:3000"}); !errors.Is(err, gateway.ErrConfig) {
		t.Errorf("a Grafana URL without a scheme: err = %v, want ErrConfig", err)
	}
}

// replica is an admin port that leads or stands by, as pkg/daemon's: /readyz answers 200
// either way (a healthy replica), /leaderz and /v1 answer only while it leads (503 while it
// stands by).
type replica struct {
	name    string
	leading atomic.Bool
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/readyz" {
		_, _ = io.WriteString(w, `{"status":"ready"}`)
		return
	}
	if !r.leading.Load() {
		http.Error(w, "standing by", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, r.name)
}

func TestGateway_RoutesToTheReplicaThatLeadsAndFollowsATakeover(t *testing.T) {
	b := backends(t)
	a, s := &replica{name: "a"}, &replica{name: "b"}
	s.leading.Store(true)
	srvA, srvB := httptest.NewServer(a), httptest.NewServer(s)
	defer srvA.Close()
	defer srvB.Close()
	b["clusterd"] = srvA.URL + ", " + srvB.URL
	h, err := gateway.New(gateway.Config{Backends: b})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	get := func() (int, string) {
		resp, err := http.Get(gw.URL + "/v1/clusters")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	if code, who := get(); code != http.StatusOK || who != "b" {
		t.Fatalf("with b leading: %d %q, want b's answer", code, who)
	}
	// b stops; a takes over. At most one request meets the stale choice (503, retry).
	s.leading.Store(false)
	a.leading.Store(true)
	var answers []string
	for range 3 {
		code, who := get()
		answers = append(answers, fmt.Sprint(code, " ", who))
	}
	if answers[1] != "200 a" || answers[2] != "200 a" {
		t.Errorf("after the takeover the gateway answered %v, want a's answers from the second request on", answers)
	}
	if _, err := gateway.New(gateway.Config{Backends: map[string]string{"clusterd": srvA.URL + ",ftp://x"}}); !errors.Is(err, gateway.ErrConfig) || !strings.Contains(err.Error(), `"ftp://x"`) {
		t.Errorf("a list with a bad URL: %v, want ErrConfig naming it", err)
	}
}

// In Kubernetes a daemon's replicas are the addresses its headless Service's name resolves
// to, and their certificates name the Service, not an address: the gateway asks each address
// for /leaderz, verifies TLS against the name, routes to the leader and follows a takeover.
func TestGateway_FindsTheLeaderAmongTheAddressesOfAServiceName(t *testing.T) {
	a, s := &replica{name: "a"}, &replica{name: "b"}
	s.leading.Store(true)
	// Two replicas on the same port at two addresses; httptest's certificate names
	// example.com and 127.0.0.1, so 127.0.0.2 verifies only against the name.
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lnA.Addr().(*net.TCPAddr).Port
	lnB, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srvA, srvB := httptest.NewUnstartedServer(a), httptest.NewUnstartedServer(s)
	srvA.Listener, srvB.Listener = lnA, lnB
	srvA.StartTLS()
	srvB.StartTLS()
	defer srvA.Close()
	defer srvB.Close()

	b := backends(t)
	b["clusterd"] = "https://example.com:" + strconv.Itoa(port)
	var lookups atomic.Int32
	h, err := gateway.New(gateway.Config{
		Backends:  b,
		Transport: srvA.Client().Transport,
		LookupHost: func(_ context.Context, host string) ([]string, error) {
			if host != "example.com" {
				return nil, fmt.Errorf("lookup %s: no such host", host)
			}
			lookups.Add(1)
			return []string{"127.0.0.2", "127.0.0.1"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(gw.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	if code, who := get("/v1/clusters"); code != http.StatusOK || who != "b" {
		t.Fatalf("with b (127.0.0.2) leading: %d %q, want b's answer", code, who)
	}
	if lookups.Load() == 0 {
		t.Error("the gateway never resolved the backend's name")
	}
	if code, body := get("/healthz"); !strings.Contains(body, "127.0.0.2:"+strconv.Itoa(port)) {
		t.Errorf("/healthz = %d %s, want clusterd's leader named by its address", code, body)
	}
	s.leading.Store(false)
	a.leading.Store(true)
	var answers []string
	for range 3 {
		code, who := get("/v1/clusters")
		answers = append(answers, fmt.Sprint(code, " ", who))
	}
	if answers[1] != "200 a" || answers[2] != "200 a" {
		t.Errorf("after the takeover the gateway answered %v, want a's answers from the second request on", answers)
	}
	// No replica leads: both are ready (healthy), but the gateway is not ready.
	// (The gateway trusts its last finding for a second, so it is asked until it looks again.)
	a.leading.Store(false)
	testenv.Eventually(t, 5*time.Second, func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "clusterd: ")
	}, "/readyz with no clusterd replica leading never answered 503 naming clusterd")
}
