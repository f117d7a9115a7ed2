package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// EnvComposeTest runs TestCompose (`make compose-test` sets it after building the images).
const EnvComposeTest = "HOSTPLANE_COMPOSE_TEST"

// composeDaemons are the daemon containers, in the order a cluster create reaches them.
var composeDaemons = []string{"clusterd", "infrad", "pkid", "componentd", "ignitiond", "nodepoold"}

// composeReplicated are the daemons deploy/compose runs twice (<daemon> and <daemon>-2,
// admin ports 808x and 818x); componentd runs once (docs/resilience.md).
var composeReplicated = []string{"clusterd", "infrad", "pkid", "ignitiond", "nodepoold"}

// composeLeader returns the compose service of daemon's replica that leads, from the
// gateway's /healthz, which names the admin port of the replica that answered.
func (c *client) composeLeader(daemon string) string {
	c.t.Helper()
	var h struct {
		Components map[string]string `json:"components"`
	}
	var svc string
	testenv.Eventually(c.t, time.Minute, func() bool {
		if code, _ := c.do("GET", "/healthz", "", &h); code != http.StatusOK {
			return false
		}
		st := h.Components[daemon]
		switch {
		case strings.Contains(st, ":81"):
			svc = daemon + "-2"
		case strings.Contains(st, ":80"):
			svc = daemon
		}
		return svc != ""
	}, "the gateway never named %s's leading replica: %v", daemon, h.Components)
	return svc
}

// composeStack is one `docker compose` project of deploy/compose.
type composeStack struct {
	t       *testing.T
	command []string // docker compose, or docker-compose
	files   []string // deploy/compose's file, then any overrides
	env     []string

	mu sync.Mutex
	// focus is what the test waits on when it fails (a cluster's name): the failure prints
	// the log lines that name it, from every service, besides the last lines of each.
	focus string
}

// setFocus names what the test waits on (setFocus("") when it is done): the log lines that
// name it are printed if the test fails meanwhile.
func (s *composeStack) setFocus(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.focus = name
}

// focusLines are the last n lines of log that name the focus as a JSON string value.
func (s *composeStack) focusLines(log []byte, n int) (string, []string) {
	s.mu.Lock()
	focus := s.focus
	s.mu.Unlock()
	if focus == "" {
		return "", nil
	}
	quoted := []byte(strconv.Quote(focus))
	var out []string
	for line := range bytes.Lines(log) {
		if bytes.Contains(line, quoted) {
			out = append(out, string(bytes.TrimRight(line, "\n")))
		}
	}
	return focus, out[max(0, len(out)-n):]
}

func (s *composeStack) run(args ...string) ([]byte, error) {
	base := slices.Clone(s.command[1:])
	for _, f := range s.files {
		base = append(base, "-f", f)
	}
	cmd := exec.Command(s.command[0], append(base, args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *composeStack) must(args ...string) {
	s.t.Helper()
	if out, err := s.run(args...); err != nil {
		s.t.Fatalf("compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func composeFile(t *testing.T) string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(self), "..", "..", "deploy", "compose", "docker-compose.yml")
}

func composeCommand(t *testing.T) []string {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	t.Fatal("neither `docker compose` nor docker-compose is installed")
	return nil
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCompose_ClusterAndPoolThroughTheGateway_SurviveADaemonRestartEach brings up
// deploy/compose from the local images, creates a cluster through the gateway and, while the
// create is under way, kills the leading replica of every replicated daemon with SIGKILL
// (componentd, which runs once, is restarted), then checks the cluster is
// Available with nothing duplicated, that a 2-node pool becomes Ready, and that both delete.
func TestCompose_ClusterAndPoolThroughTheGateway_SurviveADaemonRestartEach(t *testing.T) {
	if os.Getenv(EnvComposeTest) == "" {
		t.Skip("needs the images and Docker: run `make compose-test`")
	}
	s, c := startCompose(t, "hpsmoke")

	// A cluster create, with each daemon container restarted once while it runs.
	const cl = "smoke"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+release.Latest().Version+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	for _, d := range composeDaemons {
		got, _ := c.cluster(cl)
		available := got.Status.Conditions.IsTrue(api.ConditionAvailable)
		if !slices.Contains(composeReplicated, d) {
			t.Logf("restarting %s (cluster Available=%v)", d, available)
			s.must("restart", "-t", "10", d)
			continue
		}
		// kill -9 of the replica that leads: the other takes the lease once it expires.
		svc := c.composeLeader(d)
		t.Logf("killing %s, %s's leading replica (cluster Available=%v)", svc, d, available)
		s.must("kill", "-s", "SIGKILL", svc)
	}
	s.must("up", "-d") // the killed replicas come back as standbys
	c.waitReady(3*time.Minute, "the daemons never became ready again after their restarts")
	got := c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, 4*time.Minute)

	// Nothing duplicated: one cluster, each component once, each certificate once, one endpoint.
	var list api.ClusterList
	if code, body := c.do("GET", "/v1/clusters", "", &list); code != http.StatusOK || len(list.Items) != 1 {
		t.Fatalf("clusters after the restarts: %d %s, want exactly %s", code, body, cl)
	}
	var comps api.ComponentList
	if code, body := c.do("GET", "/v1/clusters/"+cl+"/components", "", &comps); code != http.StatusOK {
		t.Fatalf("components: %d %s", code, body)
	}
	var names []string
	for _, comp := range comps.Items {
		names = append(names, comp.Name)
	}
	assertUnique(t, "components", names)
	var pki api.PKIStatus
	if code, body := c.do("GET", "/v1/clusters/"+cl+"/pki", "", &pki); code != http.StatusOK {
		t.Fatalf("pki: %d %s", code, body)
	}
	var certs []string
	for _, crt := range pki.Certificates {
		certs = append(certs, crt.Name)
	}
	assertUnique(t, "certificates", certs)
	if ep := got.Status.ControlPlaneEndpoint; ep == nil || ep.Port == 0 {
		t.Fatalf("no control-plane endpoint: %s", lazyJSON{&got})
	}

	// A 2-node pool joins, through ignitiond, the local cloud and Cluster API in the stack.
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":2,"release":{"version":"`+release.Latest().Version+`"},"management":{"upgradeType":"Replace"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "workers", 2, 5*time.Minute)
	if ms := c.poolMachines(cl, "workers"); len(ms) != 2 {
		t.Fatalf("machines of workers = %v, want 2", machineNames(ms))
	}

	// Delete both; nothing is left.
	if code, body := c.do("DELETE", "/v1/clusters/"+cl+"/nodepools/workers", "", nil); code != http.StatusAccepted {
		t.Fatalf("delete nodepool: %d %s", code, body)
	}
	testenv.Eventually(t, 3*time.Minute, func() bool {
		_, code := c.nodePool(cl, "workers")
		return code == http.StatusNotFound && len(c.machines(cl)) == 0
	}, "node pool workers or its machines never went away: %v", lazyJSON{c.machines(cl)})
	if code, body := c.do("DELETE", "/v1/clusters/"+cl, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete cluster: %d %s", code, body)
	}
	testenv.Eventually(t, 3*time.Minute, func() bool {
		_, code := c.cluster(cl)
		return code == http.StatusNotFound
	}, "cluster %s was never deleted", cl)
}

// startCompose brings deploy/compose up as project (suffixed with the test's pid), with the
// compose files in overrides layered on top, and waits until the gateway reports every daemon
// ready. The project is torn down, volumes and all, when the test ends; its logs are printed
// if the test failed.
func startCompose(t *testing.T, project string, overrides ...string) (*composeStack, *client) {
	t.Helper()
	buf := make([]byte, 12)
	_, _ = rand.Read(buf)
	token := hex.EncodeToString(buf)
	port := freePort(t)
	s := &composeStack{t: t, command: composeCommand(t), files: append([]string{composeFile(t)}, overrides...), env: []string{
		"COMPOSE_PROJECT_NAME=" + project + strconv.Itoa(os.Getpid()),
		"HOSTPLANE_ADMIN_TOKEN=" + token,
		"HOSTPLANE_PORT=" + strconv.Itoa(port),
	}}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.run("logs", "--no-color", "--tail", "80")
			t.Logf("compose logs:\n%s", out)
			// Every line, for what the last 80 do not show.
			all, _ := s.run("logs", "--no-color", "--timestamps")
			path := filepath.Join(os.TempDir(), project+strconv.Itoa(os.Getpid())+".log")
			if err := os.WriteFile(path, all, 0o644); err == nil {
				t.Logf("the whole compose log is in %s", path)
			}
			if focus, lines := s.focusLines(all, 200); focus != "" {
				t.Logf("the last %d log lines naming %q, what the test waited on:\n%s", len(lines), focus, strings.Join(lines, "\n"))
			}
		}
		if out, err := s.run("down", "-v", "--remove-orphans", "-t", "20"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	s.must("up", "-d")
	c := newClient(t, "http://127.0.0.1:"+strconv.Itoa(port), token, "")
	c.waitReady(3*time.Minute, "the gateway never reported every daemon ready")
	return s, c
}

// waitReady waits until the gateway's /readyz answers 200: every daemon has a ready replica.
func (c *client) waitReady(timeout time.Duration, msg string) {
	c.t.Helper()
	testenv.Eventually(c.t, timeout, func() bool {
		code, _ := c.tryDo("GET", "/readyz")
		return code == http.StatusOK
	}, msg)
}

// tryDo sends a request without a body and returns its status, 0 if none came back (the
// gateway is not listening yet).
func (c *client) tryDo(method, path string) (int, error) {
	code, _, err := c.api.Raw(context.Background(), method, path, nil)
	return code, err
}

func assertUnique(t *testing.T, what string, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatalf("no %s", what)
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Fatalf("%s are duplicated: %v", what, names)
	}
}
