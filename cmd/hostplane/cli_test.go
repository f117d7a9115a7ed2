package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/cmd/hostplane/internal/cli"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// binary is the hostplane binary the tests run, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hostplane-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hostplane")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the hostplane binary:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// cliEnv runs the binary as a user would: a clean environment with its own config dir.
type cliEnv struct {
	t      *testing.T
	env    []string
	config string
}

func newCLI(t *testing.T, server, token string) *cliEnv {
	cfgHome := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + cfgHome}
	if server != "" {
		env = append(env, "HOSTPLANE_SERVER="+server)
	}
	if token != "" {
		env = append(env, "HOSTPLANE_TOKEN="+token)
	}
	return &cliEnv{t: t, env: env, config: filepath.Join(cfgHome, "hostplane", "config.yaml")}
}

func (c *cliEnv) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		c.t.Fatalf("hostplane %s: %v", strings.Join(args, " "), err)
	}
	c.t.Logf("$ hostplane %s  # exit %d", strings.Join(args, " "), r.code)
	return r
}

// background is a hostplane process left running (events -f).
type background struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	out     bytes.Buffer
	errOut  bytes.Buffer
	done    chan struct{}
	waitErr error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start runs args in the background; the test's cleanup stops it if it still runs.
func (c *cliEnv) start(args ...string) *background {
	c.t.Helper()
	b := &background{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	b.cmd.Env = c.env
	b.cmd.Stdout = lockedWriter{&b.mu, &b.out}
	b.cmd.Stderr = lockedWriter{&b.mu, &b.errOut}
	if err := b.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("$ hostplane %s &  # pid %d", strings.Join(args, " "), b.cmd.Process.Pid)
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.done)
	}()
	c.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

func (b *background) stdout() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

func (b *background) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "--- stdout:\n" + b.out.String() + "--- stderr:\n" + b.errOut.String()
}

// interrupt sends SIGINT, as ^C does, and returns the exit code.
func (b *background) interrupt(t *testing.T) int {
	t.Helper()
	if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-b.done
	return b.cmd.ProcessState.ExitCode()
}

// must runs args and fails the test unless the exit code is want.
func (c *cliEnv) must(want int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != want {
		c.t.Fatalf("hostplane %s: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	return r
}

// startStack starts `hostplane dev` in-process on free ports (without the management
// apiserver: nothing the CLI reaches needs it) and returns it with its admin token.
func startStack(t *testing.T) (*dev.Stack, string) {
	t.Helper()
	return startStackWith(t, false)
}

// startStackWith starts `hostplane dev`, with its management apiserver when management
// (Cluster API: node pools get machines).
func startStackWith(t *testing.T, management bool) (*dev.Stack, string) {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	s, err := dev.Start(context.Background(), dev.Config{
		DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1, NoManagementAPIServer: !management, NATSTrace: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Runs after the stack stopped: the whole flow ran with per-daemon NATS permissions.
	t.Cleanup(func() { checkNATSPermissions(t, s) })
	t.Cleanup(func() { s.Stop(context.Background()) })
	testenv.Eventually(t, 2*time.Minute, func() bool {
		resp, err := http.Get(s.URL() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the dev stack never became ready")
	token := s.AdminToken()
	if token == "" {
		t.Fatal("the dev stack has no admin token: its API must not be open")
	}
	return s, token
}

func decodeJSON[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("output is not a %T: %v\n%s", v, err, r)
	}
	return v
}

func decodeYAML[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &v); err != nil {
		t.Fatalf("output is not a %T in YAML: %v\n%s", v, err, r)
	}
	return v
}

// TestCLI_DrivesAClusterThroughItsLife runs the built binary against a real dev stack: one
// cluster created with --wait, read in every output format, used through the kubeconfig it
// hands out, described, and deleted with --wait; and the exit codes scripts rely on.
func TestCLI_DrivesAClusterThroughItsLife(t *testing.T) {
	s, token := startStack(t)
	hp := newCLI(t, s.URL(), token)

	t.Run("a typo is a usage error with a suggestion", func(t *testing.T) {
		r := hp.must(cli.ExitUsage, "gte", "clusters")
		if !strings.Contains(r.stderr, "Did you mean this?") || !strings.Contains(r.stderr, "\tget") {
			t.Errorf("no suggestion of get: %s", r)
		}
		r = hp.must(cli.ExitUsage, "get", "clustrs")
		if !strings.Contains(r.stderr, "\tclusters") {
			t.Errorf("no suggestion of clusters: %s", r)
		}
		r = hp.must(cli.ExitUsage, "get", "clusters", "--ouptut", "json")
		if !strings.Contains(r.stderr, "unknown flag: --ouptut") {
			t.Errorf("unknown flag not named: %s", r)
		}
		if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
			t.Errorf("stack trace in the output: %s", r)
		}
	})

	t.Run("a bad token exits 5", func(t *testing.T) {
		r := hp.must(cli.ExitAuth, "get", "clusters", "--token", "not-the-token-0123456789")
		if !strings.Contains(r.stderr, "token") {
			t.Errorf("the error does not mention the token: %s", r)
		}
		newCLI(t, s.URL(), "").must(cli.ExitAuth, "get", "clusters")
	})

	t.Run("a server validation error prints the field and exits 1", func(t *testing.T) {
		r := hp.must(cli.ExitError, "create", "cluster", "Bad_Name", "--release", "1.34.4")
		if !strings.Contains(r.stderr, "name: ") {
			t.Errorf("the field error is not printed: %s", r)
		}
		r = hp.must(cli.ExitError, "create", "cluster", "ok-name", "--release", "9.9.9")
		if !strings.Contains(r.stderr, "spec.release.version") {
			t.Errorf("the field error is not printed: %s", r)
		}
	})

	t.Run("a cluster that does not exist exits 3", func(t *testing.T) {
		hp.must(cli.ExitNotFound, "get", "cluster", "c1")
		hp.must(cli.ExitNotFound, "describe", "cluster", "c1")
		hp.must(cli.ExitNotFound, "get", "components", "c1")
	})

	// Follow the cluster's events from before it exists.
	follow := hp.start("events", "-f", "c1")

	r := hp.must(0, "create", "cluster", "c1", "--release", "1.34.4", "--wait", "--timeout", "8m")
	if !strings.Contains(r.stdout, "cluster/c1 is Available") {
		t.Errorf("create --wait did not say the cluster is Available: %s", r)
	}
	if !strings.Contains(r.stderr, "waiting for Available") {
		t.Errorf("no progress lines while waiting: %s", r)
	}
	cl := decodeJSON[api.Cluster](t, hp.must(0, "get", "cluster", "c1", "-o", "json"))
	if !cl.Status.Conditions.IsTrue(api.ConditionAvailable) {
		t.Fatalf("create --wait returned before the cluster was Available: %+v", cl.Status.Conditions)
	}

	t.Run("etcd backups: create --wait, get, delete", func(t *testing.T) {
		r := hp.must(0, "create", "backup", "b1", "--cluster", "c1", "--wait")
		if !strings.Contains(r.stdout, "backup/b1 complete: etcd revision") {
			t.Errorf("create backup --wait: %s", r)
		}
		r = hp.must(0, "get", "backups", "c1")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME COMPLETE REVISION SIZE TRIGGER AGE" {
			t.Fatalf("table: %s", r)
		}
		if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != "b1" || f[1] != "True" || f[4] != "on-demand" {
			t.Errorf("row = %q", lines[1])
		}
		b := decodeJSON[api.Backup](t, hp.must(0, "get", "backups", "c1", "b1", "-o", "json"))
		if !b.IsComplete() || b.Status.Revision == 0 {
			t.Errorf("backup = %+v", b)
		}
		hp.must(cli.ExitError, "create", "backup", "b1", "--cluster", "c1") // exists: 409
		hp.must(cli.ExitNotFound, "get", "backups", "nope")
		hp.must(cli.ExitUsage, "create", "cluster", "c2", "--release", "1.34.4", "--restore-from", "c1")
		r = hp.must(cli.ExitError, "create", "cluster", "c2", "--release", "1.34.4", "--restore-from", "c1/nope")
		if !strings.Contains(r.stderr, "spec.restoreFrom.backup") {
			t.Errorf("the field error is not printed: %s", r)
		}
		hp.must(0, "delete", "backup", "b1", "--cluster", "c1")
		hp.must(cli.ExitNotFound, "get", "backups", "c1", "b1")
	})

	t.Run("get clusters in every output format", func(t *testing.T) {
		r := hp.must(0, "get", "clusters")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME VERSION AVAILABLE PROGRESSING AGE" {
			t.Fatalf("table: %s", r)
		}
		if f := strings.Fields(lines[1]); len(f) != 5 || f[0] != "c1" || f[1] != "1.34.4" || f[2] != "True" || f[3] != "False" {
			t.Errorf("row = %q", lines[1])
		}
		r = hp.must(0, "get", "clusters", "-o", "wide")
		lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME VERSION AVAILABLE PROGRESSING AGE ENDPOINT MESSAGE") {
			t.Fatalf("wide header: %s", r)
		}
		if !strings.Contains(lines[1], endpoint(cl)) {
			t.Errorf("wide row has no endpoint %s: %q", endpoint(cl), lines[1])
		}
		l := decodeJSON[api.ClusterList](t, hp.must(0, "get", "clusters", "-o", "json"))
		if len(l.Items) != 1 || l.Items[0].Name != "c1" {
			t.Errorf("json list = %+v", l)
		}
		l = decodeYAML[api.ClusterList](t, hp.must(0, "get", "clusters", "-o", "yaml"))
		if len(l.Items) != 1 || l.Items[0].Spec.Release.Version != "1.34.4" {
			t.Errorf("yaml list = %+v", l)
		}
		one := decodeYAML[api.Cluster](t, hp.must(0, "get", "cluster", "c1", "-o", "yaml"))
		if one.Name != "c1" || !one.Status.Conditions.IsTrue(api.ConditionAvailable) {
			t.Errorf("yaml cluster = %+v", one)
		}
		hp.must(cli.ExitUsage, "get", "clusters", "-o", "xml")
	})

	t.Run("get components, pki and infra", func(t *testing.T) {
		r := hp.must(0, "get", "components", "c1")
		for _, name := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
			if !strings.Contains(r.stdout, "\n"+name+" ") {
				t.Errorf("component %s missing: %s", name, r)
			}
		}
		if !strings.Contains(r.stdout, "1/1") {
			t.Errorf("no ready counts: %s", r)
		}
		comps := decodeJSON[api.ComponentList](t, hp.must(0, "get", "components", "c1", "-o", "json"))
		if len(comps.Items) != 5 {
			t.Errorf("components = %d, want 5", len(comps.Items))
		}
		for _, c := range comps.Items {
			// The autoscaler is listed, idle: the cluster has no autoscaled node pool.
			if c.Name == api.ComponentKarpenter && (c.Spec.Replicas != 0 || c.Status.ReadyReplicas != 0) {
				t.Errorf("karpenter wants %d replicas, %d ready; want none without an autoscaled pool", c.Spec.Replicas, c.Status.ReadyReplicas)
			}
		}
		hp.must(0, "get", "components", "c1", "-o", "wide")
		p := decodeJSON[api.PKIStatus](t, hp.must(0, "get", "pki", "c1", "-o", "json"))
		if !p.Ready || len(p.Certificates) == 0 {
			t.Errorf("pki = %+v", p)
		}
		if r := hp.must(0, "get", "pki", "c1"); !strings.Contains(r.stdout, api.CertRootCA) {
			t.Errorf("pki table has no %s: %s", api.CertRootCA, r)
		}
		inf := decodeJSON[api.Infra](t, hp.must(0, "get", "infra", "c1", "-o", "json"))
		if !inf.Ready || inf.Endpoint.Port == 0 {
			t.Errorf("infra = %+v", inf)
		}
		if r := hp.must(0, "get", "infra", "c1"); !strings.Contains(r.stdout, endpoint(cl)) {
			t.Errorf("infra table has no endpoint: %s", r)
		}
	})

	t.Run("the kubeconfig works with client-go", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A kubeconfig of the caller's own: its user is the token's, and it lists namespaces
		// (its group is bound to cluster-admin).
		file := filepath.Join(t.TempDir(), "c1.kubeconfig")
		hp.must(0, "kubeconfig", "c1", "-f", file, "--ttl", "30m")
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("kubeconfig mode = %v, want 0600", st.Mode().Perm())
		}
		kc, _ := os.ReadFile(file)
		cs, err := kube.Clientset(kc)
		if err != nil {
			t.Fatal(err)
		}
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list namespaces with the kubeconfig: %v", err)
		}
		if len(nss.Items) == 0 {
			t.Error("no namespaces")
		}
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := review.Status.UserInfo; u.Username != api.KubeconfigUserPrefix+auth.AdminTokenName || !slices.Contains(u.Groups, api.GroupClusterAdmins) || slices.Contains(u.Groups, "system:masters") {
			t.Errorf("the kubeconfig authenticates as %s %v, want %s%s in %s (not system:masters)", u.Username, u.Groups, api.KubeconfigUserPrefix, auth.AdminTokenName, api.GroupClusterAdmins)
		}
		if cert := clientCert(t, kc); cert.NotAfter.Sub(cert.NotBefore) > 32*time.Minute {
			t.Errorf("the kubeconfig's certificate is valid from %v to %v, want about 30m", cert.NotBefore, cert.NotAfter)
		}
		if r := hp.run("kubeconfig", "c1", "--ttl", "10s"); r.code == 0 || !strings.Contains(r.stderr, "ttl") {
			t.Errorf("a 10s ttl: %s; want a refusal naming ttl", r)
		}

		// The break-glass one: system:masters, the same on every call.
		bg := hp.must(0, "kubeconfig", "c1", "--break-glass").stdout
		if again := hp.must(0, "kubeconfig", "c1", "--break-glass").stdout; again != bg {
			t.Error("the break-glass kubeconfig differs between two calls")
		}
		if cert := clientCert(t, []byte(bg)); !slices.Contains(cert.Subject.Organization, "system:masters") {
			t.Errorf("the break-glass kubeconfig's certificate is %v, want system:masters", cert.Subject)
		}
	})

	t.Run("describe shows spec, conditions, versions and components", func(t *testing.T) {
		r := hp.must(0, "describe", "cluster", "c1")
		for _, want := range []string{"Name:", "c1", "Release:", "1.34.4", "Endpoint:", endpoint(cl),
			"Conditions:", "TYPE", "REASON", "Available", "KubeAPIServerAvailable", "Version:", "Completed",
			"Components:", "kube-apiserver", "Events:"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("describe lacks %q:\n%s", want, r)
			}
		}
	})

	t.Run("events", func(t *testing.T) {
		r := hp.run("events", "c1")
		if r.code != 0 {
			t.Fatalf("events: %s", r)
		}
		if !strings.Contains(r.stdout, "cluster.created c1") {
			t.Errorf("no cluster.created event: %s", r)
		}
	})

	t.Run("events -f follows the stream as TIME TYPE SUBJECT lines", func(t *testing.T) {
		testenv.Eventually(t, time.Minute, func() bool {
			out := follow.stdout()
			return strings.Contains(out, " cluster.created c1\n") && strings.Contains(out, " component.available c1")
		}, "events -f did not show the cluster's creation: %s", follow)
		first := strings.SplitN(follow.stdout(), "\n", 2)[0]
		if f := strings.Fields(first); len(f) != 3 || !strings.HasPrefix(f[1], "cluster.") && !strings.HasPrefix(f[1], "infra.") && !strings.HasPrefix(f[1], "pki.") && !strings.HasPrefix(f[1], "component.") {
			t.Errorf("first line %q is not TIME TYPE SUBJECT", first)
		} else if _, err := time.Parse(time.RFC3339, f[0]); err != nil {
			t.Errorf("first line %q: %v", first, err)
		}
		if code := follow.interrupt(t); code != 0 {
			t.Errorf("events -f exited %d after an interrupt: %s", code, follow)
		}
	})

	t.Run("the config file supplies server and token", func(t *testing.T) {
		bare := newCLI(t, "", "")
		bare.must(0, "config", "set", "server", s.URL())
		bare.must(0, "config", "set", "token", token)
		st, err := os.Stat(bare.config)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("config file: %v %v", st, err)
		}
		if r := bare.must(0, "get", "clusters"); !strings.Contains(r.stdout, "c1") {
			t.Errorf("get clusters through the config file: %s", r)
		}
		r := bare.must(0, "config", "view")
		if strings.Contains(r.stdout, token) {
			t.Errorf("config view shows the token: %s", r)
		}
		if !strings.Contains(r.stdout, s.URL()) {
			t.Errorf("config view lacks the server: %s", r)
		}
		// A flag wins over the config file.
		bare.must(1, "get", "clusters", "--server", "http://127.0.0.1:1")
	})

	// Deletion cannot finish within a millisecond of its request: --wait gives up with 4.
	r = hp.must(cli.ExitTimeout, "delete", "cluster", "c1", "--wait", "--timeout", "1ms")
	if !strings.Contains(r.stderr, "timed out") {
		t.Errorf("delete --wait --timeout 1ms: %s", r)
	}
	// Deleting again is harmless; this time wait for it.
	r = hp.must(0, "delete", "cluster", "c1", "--wait", "--timeout", "5m")
	if !strings.Contains(r.stdout, "cluster/c1 deleted") {
		t.Errorf("delete --wait: %s", r)
	}
	hp.must(cli.ExitNotFound, "get", "cluster", "c1")
	hp.must(cli.ExitNotFound, "delete", "cluster", "c1")
}

func endpoint(c api.Cluster) string {
	if c.Status.ControlPlaneEndpoint == nil {
		return "<no endpoint>"
	}
	return fmt.Sprintf("https://%s:%d", c.Status.ControlPlaneEndpoint.Host, c.Status.ControlPlaneEndpoint.Port)
}

// TestCLI_DrivesANodePoolThroughItsLife runs the built binary against a real dev stack as a
// user would: a cluster and a 2-machine node pool created with --wait, the pool and its
// machines read in every output format and described, the pool scaled to 3 by an inbound
// nodepool.scale CloudEvent on NATS while `events -f` follows, the same event id replayed to
// no effect, then pool and cluster deleted with --wait.
func TestCLI_DrivesANodePoolThroughItsLife(t *testing.T) {
	s, token := startStackWith(t, true)
	hp := newCLI(t, s.URL(), token)
	const c, pool = "np1", "workers"

	hp.must(0, "create", "cluster", c, "--release", "1.34.4", "--wait", "--timeout", "8m")
	hp.must(cli.ExitUsage, "create", "nodepool", pool, "--replicas", "2")
	if r := hp.must(cli.ExitError, "create", "nodepool", pool, "--cluster", c, "--replicas", "2", "--instance-type", "local.huge"); !strings.Contains(r.stderr, "local.small") {
		t.Errorf("an unknown instance type: the error does not name the valid ones: %s", r)
	}
	r := hp.must(0, "create", "nodepool", pool, "--cluster", c, "--replicas", "2", "--instance-type", "local.small", "--wait", "--timeout", "5m")
	if !strings.Contains(r.stdout, "nodepool/"+pool+" created in cluster "+c) || !strings.Contains(r.stdout, "done") {
		t.Errorf("create nodepool --wait: %s", r)
	}
	np := getNodePool(t, hp, c, pool)
	if np.Status.ReadyReplicas != 2 || np.Status.Replicas != 2 {
		t.Fatalf("create --wait returned with %d/%d ready machines", np.Status.ReadyReplicas, np.Status.Replicas)
	}

	t.Run("get nodepools in every output format", func(t *testing.T) {
		r := hp.must(0, "get", "nodepools", c)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME DESIRED CURRENT READY VERSION AGE" {
			t.Fatalf("table: %s", r)
		}
		if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != pool || f[1] != "2" || f[2] != "2" || f[3] != "2" || f[4] != "1.34.4" {
			t.Errorf("row = %q", lines[1])
		}
		r = hp.must(0, "get", "nodepools", c, "-o", "wide")
		lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME DESIRED CURRENT READY VERSION AGE UPGRADE-TYPE AUTOSCALING MESSAGE") {
			t.Fatalf("wide header: %s", r)
		}
		if len(lines) != 2 || !strings.Contains(lines[1], api.UpgradeTypeReplace) {
			t.Errorf("wide row: %s", r)
		}
		l := decodeJSON[api.NodePoolList](t, hp.must(0, "get", "nodepools", c, "-o", "json"))
		if len(l.Items) != 1 || l.Items[0].Name != pool || l.Items[0].Cluster != c || l.Items[0].Status.ReadyReplicas != 2 {
			t.Errorf("json list = %+v", l)
		}
		l = decodeYAML[api.NodePoolList](t, hp.must(0, "get", "nodepools", c, "-o", "yaml"))
		if len(l.Items) != 1 || l.Items[0].Spec.Replicas == nil || *l.Items[0].Spec.Replicas != 2 {
			t.Errorf("yaml list = %+v", l)
		}
		one := decodeYAML[api.NodePool](t, hp.must(0, "get", "nodepool", c, pool, "-o", "yaml"))
		if one.Name != pool || !one.Status.Conditions.IsTrue(api.NodePoolConditionReady) {
			t.Errorf("yaml nodepool = %+v", one)
		}
		hp.must(cli.ExitNotFound, "get", "nodepool", c, "nope")
	})

	t.Run("userdata is the stub the pool's machines boot", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "userdata.ign")
		hp.must(0, "userdata", pool, "-c", c, "-f", file)
		if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("userdata file: %v %v", st, err)
		}
		ud, _ := os.ReadFile(file)
		stub, err := ignition.ParseStub(ud)
		if err != nil || !strings.HasSuffix(stub.URL, "/ignition") {
			t.Fatalf("userdata %s: %v", ud, err)
		}
		if out := hp.must(0, "userdata", pool, "-c", c).stdout; out != string(ud) {
			t.Error("userdata on stdout differs from the file")
		}
		hp.must(cli.ExitUsage, "userdata", pool)
		hp.must(cli.ExitNotFound, "userdata", "nope", "-c", c)
	})

	t.Run("get machines in every output format", func(t *testing.T) {
		l := decodeJSON[api.MachineList](t, hp.must(0, "get", "machines", c, "-o", "json"))
		if len(l.Items) != 2 {
			t.Fatalf("machines = %+v, want 2", l)
		}
		for _, m := range l.Items {
			if m.NodePool != pool || m.Cluster != c || m.Phase != "Running" || m.NodeName == "" || m.ProviderID == "" ||
				m.InstanceType != "local.small" || m.Zone == "" {
				t.Errorf("machine = %+v", m)
			}
		}
		y := decodeYAML[api.MachineList](t, hp.must(0, "get", "machines", c, "-o", "yaml"))
		if len(y.Items) != 2 || y.Items[0].Name != l.Items[0].Name {
			t.Errorf("yaml machines = %+v", y)
		}
		r := hp.must(0, "get", "machines", c)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME NODEPOOL PHASE NODE TYPE ZONE VERSION AGE" {
			t.Fatalf("table: %s", r)
		}
		for i, m := range l.Items {
			if f := strings.Fields(lines[i+1]); len(f) != 8 || f[0] != m.Name || f[1] != pool || f[2] != m.Phase || f[3] != m.NodeName ||
				f[4] != m.InstanceType || f[5] != m.Zone {
				t.Errorf("row = %q, want machine %+v", lines[i+1], m)
			}
		}
		r = hp.must(0, "get", "machines", c, "-o", "wide")
		lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME NODEPOOL PHASE NODE TYPE ZONE VERSION AGE MACHINE CAPACITY NODECLAIM PROVIDER-ID CONFIG-HASH MESSAGE" {
			t.Fatalf("wide: %s", r)
		}
		for i, m := range l.Items {
			if !strings.Contains(lines[i+1], m.ProviderID) || m.ConfigHash != "" && !strings.Contains(lines[i+1], m.ConfigHash) {
				t.Errorf("wide row %q lacks the provider ID or config hash of %+v", lines[i+1], m)
			}
			// Machines of platform local are simulated, and say so.
			if m.Platform != api.PlatformLocal || strings.Fields(lines[i+1])[8] != "simulated" {
				t.Errorf("wide row %q of a %q machine, want it said simulated", lines[i+1], m.Platform)
			}
		}
	})

	t.Run("describe nodepool shows conditions, counts, version, config hash and machines", func(t *testing.T) {
		hp.must(cli.ExitUsage, "describe", "nodepool", pool)
		hp.must(cli.ExitNotFound, "describe", "nodepool", "nope", "--cluster", c)
		r := hp.must(0, "describe", "nodepool", pool, "--cluster", c)
		ms := decodeJSON[api.MachineList](t, hp.must(0, "get", "machines", c, "-o", "json"))
		want := []string{"Name:", pool, "Cluster:", c, "Release:", "1.34.4", "Instance type:", "local.small", "2 desired, 2 current, 2 ready",
			"Upgrade type:", api.UpgradeTypeReplace, "Version:", "Config hash:", np.Status.ConfigHash,
			"Conditions:", "TYPE", api.NodePoolConditionReady, "Machines:", "NODEPOOL"}
		for _, m := range ms.Items {
			want = append(want, m.Name, m.NodeName)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("describe lacks %q:\n%s", w, r)
			}
		}
	})

	t.Run("an inbound nodepool.scale event scales the pool, once per id", func(t *testing.T) {
		follow := hp.start("events", "-f", c)
		nc, err := s.ConnectNATS(t.Context(), natsauth.Admin)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		subject := "hostplane.in." + c + ".nodepool.scale"
		ev, err := json.Marshal(map[string]any{
			"specversion": "1.0", "id": "autoscaler-1", "source": "/test/autoscaler",
			"type": "io.hostplane.in.nodepool.scale", "time": time.Now().UTC(),
			"datacontenttype": "application/json", "data": map[string]any{"nodePool": pool, "replicas": 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subject, ev, jetstream.WithMsgID("autoscaler-1")); err != nil {
			t.Fatal(err)
		}
		var scaled api.NodePool
		testenv.Eventually(t, 5*time.Minute, func() bool {
			scaled = getNodePool(t, hp, c, pool)
			return scaled.Status.ObservedGeneration == scaled.Generation && scaled.Status.ReadyReplicas == 3 && scaled.Status.Replicas == 3
		}, "the pool never reached 3 Ready machines: %+v", &scaled)
		if scaled.Spec.Replicas == nil || *scaled.Spec.Replicas != 3 || scaled.Generation <= np.Generation {
			t.Errorf("scaled pool: replicas %v generation %d (was %d)", scaled.Spec.Replicas, scaled.Generation, np.Generation)
		}
		testenv.Eventually(t, time.Minute, func() bool {
			out := follow.stdout()
			return strings.Contains(out, " nodepool.updated ") || strings.Contains(out, " nodepool.status ")
		}, "events -f did not show the node pool's update: %s", follow)

		// The same id again, past JetStream's de-duplication (no Nats-Msg-Id): the owner
		// refuses it as a duplicate and nothing changes.
		if _, err := js.Publish(ctx, subject, ev); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, func() bool {
			return strings.Contains(follow.stdout(), " inbox.rejected ")
		}, "events -f did not show the replay's rejection: %s", follow)
		again := getNodePool(t, hp, c, pool)
		if again.Generation != scaled.Generation || again.Spec.Replicas == nil || *again.Spec.Replicas != 3 {
			t.Errorf("the replayed event changed the pool: generation %d -> %d, replicas %v", scaled.Generation, again.Generation, again.Spec.Replicas)
		}
		if code := follow.interrupt(t); code != 0 {
			t.Errorf("events -f exited %d after an interrupt: %s", code, follow)
		}
	})

	r = hp.must(0, "delete", "nodepool", pool, "--cluster", c, "--wait", "--timeout", "5m")
	if !strings.Contains(r.stdout, "nodepool/"+pool+" deleting") {
		t.Errorf("delete nodepool --wait: %s", r)
	}
	hp.must(cli.ExitNotFound, "get", "nodepool", c, pool)
	if r := hp.run("get", "machines", c, "-o", "json"); r.code != 0 || len(decodeJSON[api.MachineList](t, r).Items) != 0 {
		t.Errorf("machines left after the pool's deletion: %s", r)
	}
	r = hp.must(0, "delete", "cluster", c, "--wait", "--timeout", "5m")
	if !strings.Contains(r.stdout, "cluster/"+c+" deleted") {
		t.Errorf("delete cluster --wait: %s", r)
	}
	hp.must(cli.ExitNotFound, "get", "cluster", c)
}

func getNodePool(t *testing.T, hp *cliEnv, cluster, pool string) api.NodePool {
	t.Helper()
	return decodeJSON[api.NodePool](t, hp.must(0, "get", "nodepool", cluster, pool, "-o", "json"))
}

// checkNATSPermissions fails the test on any NATS permission violation (a daemon needed a
// subject pkg/natsauth's table does not give it) and logs each daemon's permissions that the
// flow never used: the table should hold nothing a daemon never needs, though a short flow
// does not take every path (a changed stream config, a lost watch).
func checkNATSPermissions(t *testing.T, s *dev.Stack) {
	for _, v := range s.NATSViolations() {
		t.Errorf("NATS permission violation: %s", v)
	}
	usage := s.NATSUsage()
	for _, d := range natsauth.Daemons {
		id, _ := s.NATSCreds.Identity(d.Name)
		if unused := id.Unused(usage[d.Name]); len(unused) > 0 {
			t.Logf("%s never used: %v", d.Name, unused)
		}
	}
}

// clientCert is the client certificate of a kubeconfig's current user.
func clientCert(t *testing.T, kubeconfig []byte) *x509.Certificate {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := certs.ParseCertificate(cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].ClientCertificateData)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
