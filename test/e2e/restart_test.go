package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// startStackAt starts `hostplane dev` on dir (a restart when dir holds an earlier stack's
// state) and returns it with a client; the caller stops it. opts change the configuration.
func startStackAt(t *testing.T, dir string, opts ...func(*dev.Config)) (*dev.Stack, *client) {
	t.Helper()
	cfg := dev.Config{
		DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1, KarpenterBinary: testenv.KarpenterBinary(t),
		Logger: slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := dev.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s.URL(), s.AdminToken(), dir)
	testenv.Eventually(t, time.Minute, func() bool {
		code, _ := c.do("GET", "/healthz", "", nil)
		return code == http.StatusOK
	}, "hostplane dev never became healthy")
	return s, c
}

// Stopping hostplane dev (Ctrl-C) right after deleting a cluster that has a node pool stops
// the cluster's control plane with everything else. Started again, the deletion must finish:
// the node pool's machines are drained and deleted through that control plane, so it has to
// run again until they are gone, and then nothing of the cluster may be left running.
func TestCluster_DeletedWithANodePool_FinishesAfterAStopMidDelete(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	s, c := startStackAt(t, dir)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop(context.Background())
		}
	})
	const cl = "leaving"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":1,
		"release":{"version":"`+newRelease+`"},"management":{"upgradeType":"Replace"},"nodeDrainTimeout":"20s"}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "workers", 1, poolReady)

	if code, body := c.do("DELETE", "/v1/clusters/"+cl, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete cluster: %d %s", code, body)
	}
	s.Stop(context.Background()) // as Ctrl-C does, right after the DELETE
	stopped = true

	s2, c2 := startStackAt(t, dir)
	t.Cleanup(func() { s2.Stop(context.Background()) })
	var last api.Cluster
	testenv.Eventually(t, 4*time.Minute, func() bool {
		var code int
		last, code = c2.cluster(cl)
		return code == http.StatusNotFound
	}, "cluster %s never finished deleting after the restart: %s", cl, lazyJSON{&last})
	// The local cloud keeps a directory per machine of a cluster while the machine exists.
	testenv.Eventually(t, time.Minute, func() bool {
		left, _ := os.ReadDir(filepath.Join(dir, "localcloud", "machines", cl))
		return len(left) == 0
	}, "the local cloud still holds machines of the deleted cluster")
	if left := testenv.ProcessesUnder(filepath.Join(dir, "componentd", "clusters", cl)); len(left) > 0 {
		t.Errorf("processes of the deleted cluster still run: pids %v", left)
	}
}
