package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// shared is the one `hostplane dev` stack of the package that the tests needing nothing of
// their own (no configuration, no restart, no clock) share, one after another: starting a
// stack (NATS, the management etcd and kube-apiserver with Cluster API's CRDs, six daemons)
// costs more than most tests' own work. Each test that uses it leaves it as it found it: its
// cleanup deletes every cluster it made and waits for them to be gone.
var shared struct {
	once  sync.Once
	stack *dev.Stack
	root  string   // a temporary directory: the data dir and the log
	dir   string   // the stack's data dir
	log   *os.File // the stack's own log (warnings and errors), printed for a failing test
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stack != nil {
		shared.stack.Stop(context.Background())
	}
	if shared.root != "" {
		os.RemoveAll(shared.root)
	}
	os.Exit(code)
}

// stack returns the package's shared `hostplane dev` (started by the first test that asks)
// with a client, for a test that makes its own clusters on it: the cleanup deletes every
// cluster left when the test ends and, if the test failed, prints what the stack logged
// meanwhile.
func stack(t *testing.T) (*dev.Stack, *client) {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	shared.once.Do(func() { startShared(t) })
	if shared.err != nil {
		t.Fatalf("the shared stack did not start: %v", shared.err)
	}
	c := newClient(t, shared.stack.URL(), shared.stack.AdminToken(), shared.dir)
	testenv.Eventually(t, time.Minute, func() bool {
		code, _ := c.do("GET", "/healthz", "", nil)
		return code == http.StatusOK
	}, "the shared hostplane dev is not healthy")
	logFrom, _ := shared.log.Seek(0, io.SeekEnd)
	t.Cleanup(func() {
		deleteEveryCluster(t, c)
		if t.Failed() {
			printLogSince(t, logFrom)
		}
	})
	return shared.stack, c
}

func startShared(t *testing.T) {
	shared.err = fmt.Errorf("it failed to start in %s", t.Name()) // until it has started
	root, err := os.MkdirTemp("", "hostplane-e2e-shared-")
	if err != nil {
		shared.err = err
		return
	}
	shared.root, shared.dir = root, filepath.Join(root, "data")
	if shared.log, err = os.Create(filepath.Join(root, "stack.log")); err != nil {
		shared.err = err
		return
	}
	// startStackAt as for a stack of a test's own, but logging to the file: the stack outlives t.
	s, _ := startStackAt(t, shared.dir, func(cfg *dev.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(shared.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
		// The backup test's schedule fires every 2s (retention seen in seconds); the default
		// minimum is 5m.
		cfg.MinBackupInterval = sharedMinBackupInterval
		cfg.MaxBackupsPerCluster = sharedMaxBackupsPerCluster
	})
	shared.stack, shared.err = s, nil
}

// sharedMinBackupInterval is the shared stack's shortest backup schedule interval, and
// sharedMaxBackupsPerCluster its bound on a cluster's on-demand backups.
const (
	sharedMinBackupInterval    = 2 * time.Second
	sharedMaxBackupsPerCluster = 3
)

// deleteEveryCluster deletes the clusters left on the shared stack and waits until each is
// gone, so the next test starts on an empty stack.
func deleteEveryCluster(t *testing.T, c *client) {
	t.Helper()
	var list api.ClusterList
	if code, body := c.do("GET", "/v1/clusters", "", &list); code != http.StatusOK {
		t.Errorf("cleanup: GET /v1/clusters: %d %s", code, body)
		return
	}
	for _, cl := range list.Items {
		if code, body := c.do("DELETE", "/v1/clusters/"+cl.Name, "", nil); code != http.StatusAccepted && code != http.StatusNotFound {
			t.Errorf("cleanup: DELETE cluster %s: %d %s", cl.Name, code, body)
		}
	}
	for _, cl := range list.Items {
		testenv.Eventually(t, 5*time.Minute, func() bool {
			_, code := c.cluster(cl.Name)
			return code == http.StatusNotFound
		}, "cleanup: cluster %s was never deleted; the tests after this one share its stack", cl.Name)
	}
}

// printLogSince prints (the last 300 lines of) what the shared stack logged from offset on.
func printLogSince(t *testing.T, offset int64) {
	b, err := os.ReadFile(shared.log.Name())
	if err != nil || int64(len(b)) < offset {
		return
	}
	lines := bytes.Split(bytes.TrimRight(b[offset:], "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-300):]
	t.Logf("the shared stack's log during this test (last %d lines):\n%s", len(lines), bytes.Join(lines, []byte("\n")))
}
