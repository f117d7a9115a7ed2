package dev_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/leader"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// getJSON GETs url, with a bearer token unless token is "".
func getJSON(t *testing.T, url string, token ...string) (int, map[string]any, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err.Error()
	}
	if len(token) > 0 && token[0] != "" {
		req.Header.Set("Authorization", "Bearer "+token[0])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header.Get("Content-Type")
}

func start(t *testing.T, dir string) *dev.Stack {
	t.Helper()
	return startConfig(t, dev.Config{DataDir: dir})
}

// startConfig starts a stack with cfg on free ports, logging warnings to the test; a NATS
// permission violation fails the test.
func startConfig(t *testing.T, cfg dev.Config) *dev.Stack {
	t.Helper()
	cfg.Addr, cfg.NATSPort = "127.0.0.1:0", -1
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := dev.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, v := range s.NATSViolations() {
			t.Errorf("NATS permission violation: %s", v)
		}
	})
	return s
}

func TestDev_EveryDaemonReportsReadyThroughTheFrontDoor_AndARestartResumes(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer)
	dir := t.TempDir()
	s := start(t, dir)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop(context.Background())
		}
	})

	var health map[string]any
	testenv.Eventually(t, time.Minute, func() bool {
		code, m, _ := getJSON(t, s.URL()+"/healthz")
		health = m
		return code == http.StatusOK
	}, "front door /healthz never said ok: %v", health)
	comps, _ := health["components"].(map[string]any)
	for _, name := range []string{"clusterd", "nodepoold", "componentd", "pkid", "infrad", "ignitiond", "nats", "management-apiserver"} {
		if comps[name] != "ready" {
			t.Errorf("/healthz: %s = %v, want ready", name, comps[name])
		}
	}
	if code, _, _ := getJSON(t, s.URL()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}
	code, problem, ctype := getJSON(t, s.URL()+"/v1/no-such-thing", s.AdminToken())
	if code != http.StatusNotFound || ctype != "application/problem+json" || problem["detail"] == nil {
		t.Errorf("unknown route: %d %s %v", code, ctype, problem)
	}
	if code, _, _ := getJSON(t, s.URL()+"/v1/clusters"); code != http.StatusUnauthorized {
		t.Errorf("/v1/clusters without a token = %d, want 401", code)
	}

	// The management apiserver is real: a client lists its namespaces.
	cs, err := s.Management.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1ListOptions()); err != nil {
		t.Fatalf("management apiserver: %v", err)
	}
	mgmtPid := s.Management.APIServer().Status().Pid

	s.Stop(context.Background())
	stopped = true
	if err := syscall.Kill(mgmtPid, 0); err == nil {
		t.Fatalf("management kube-apiserver (pid %d) still runs after Stop", mgmtPid)
	}

	// Same data dir: it resumes.
	s2 := start(t, dir)
	t.Cleanup(func() { s2.Stop(context.Background()) })
	testenv.Eventually(t, time.Minute, func() bool {
		code, _, _ := getJSON(t, s2.URL()+"/healthz")
		return code == http.StatusOK
	}, "restarted stack never became healthy")
}

func TestDev_Replicas_OutOfRangeIsRefusedBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{-1, 6} {
		if _, err := dev.Start(t.Context(), dev.Config{DataDir: dir + "/x", Replicas: n, Addr: "127.0.0.1:0", NATSPort: -1}); err == nil || !strings.Contains(err.Error(), "replicas") {
			t.Errorf("--replicas %d: %v, want an error naming replicas", n, err)
		}
	}
	if _, err := os.Stat(dir + "/x"); err == nil {
		t.Error("a refused start made the data dir")
	}
}

// A daemon whose lease another holder takes (as when a stall outlasts its renewals and
// something else leads) stops working at once; hostplane dev starts it again, it leads once
// that lease expires, and its API answers again: the stack does not stop, nor serve 503 for
// good.
func TestDev_ADaemonThatLosesItsLease_IsStartedAgainAndLeadsOnceTheLeaseExpires(t *testing.T) {
	s := startConfig(t, dev.Config{DataDir: t.TempDir(), NoManagementAPIServer: true})
	t.Cleanup(func() { s.Stop(context.Background()) })
	clusters := s.URL() + "/v1/clusters"
	testenv.Eventually(t, time.Minute, func() bool {
		code, _, _ := getJSON(t, clusters, s.AdminToken())
		return code == http.StatusOK
	}, "clusterd never answered")
	// Every daemon leads before the lease is taken, so clusterd's own readiness is what the
	// test watches fall and rise, not another daemon still starting.
	var clusterd dev.Daemon
	for _, d := range s.Daemons {
		if d.Name() == "clusterd" {
			clusterd = d
		}
	}
	if clusterd == nil {
		t.Fatal("the stack runs no daemon named clusterd")
	}
	testenv.Eventually(t, time.Minute, func() bool {
		return s.Ready(t.Context()) == nil
	}, "the stack never became ready")

	nc, err := s.ConnectNATS(t.Context(), natsauth.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	intruder, _ := json.Marshal(leader.Record{Holder: "intruder", Acquired: now, Renewed: now})
	if _, err := kv.Put(t.Context(), "clusterd", intruder); err != nil {
		t.Fatal(err)
	}
	// clusterd stops leading at its next renewal: the front door has no leader to route to.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return clusterd.Ready(t.Context()) != nil
	}, "clusterd went on leading with its lease held by another")
	testenv.Eventually(t, time.Minute, func() bool {
		code, _, _ := getJSON(t, clusters, s.AdminToken())
		return code == http.StatusOK
	}, "clusterd never answered again after its lease was taken")
	e, err := kv.Get(t.Context(), "clusterd")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Value()), "intruder") {
		t.Errorf("the lease after clusterd answered again: %s, want clusterd's", e.Value())
	}
	select {
	case err := <-s.Err():
		t.Fatalf("the stack reported %v; want the daemon started again", err)
	default:
	}
}
