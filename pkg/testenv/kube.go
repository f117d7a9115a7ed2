package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// KubeAPIServer starts a real etcd and kube-apiserver of release.Latest() in a fresh
// t.TempDir(), with its own process.Supervisor, and stops both when the test ends. The
// returned cluster's Kubeconfig and RESTConfig are admin (system:masters) credentials.
//
// When the binaries are not built the test is skipped with instructions (`make k8s-bins`);
// under CI=true it fails instead.
func KubeAPIServer(t testing.TB) *localkube.Cluster {
	t.Helper()
	rel := release.Latest()
	RequireBinaries(t, rel, release.Etcd, release.KubeAPIServer)

	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(testWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	sup, err := process.NewSupervisor(filepath.Join(dir, "run"), log)
	if err != nil {
		t.Fatalf("testenv: new supervisor: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sup.StopAll(ctx); err != nil {
			t.Errorf("testenv: stop kube-apiserver and etcd: %v", err)
		}
		_ = sup.Close()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := localkube.Start(ctx, localkube.Config{
		Dir:        filepath.Join(dir, "kube"),
		Release:    rel,
		Supervisor: sup,
		Log:        log,
	})
	if err != nil {
		t.Fatalf("testenv: start kube-apiserver: %v", err)
	}
	return c
}

// RequireBinaries skips t (or, under CI=true, fails it) unless the release's binaries of
// every named component are built, saying how to build them.
func RequireBinaries(t testing.TB, rel release.Release, components ...string) {
	t.Helper()
	for _, c := range components {
		if _, err := rel.Binary(c); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("testenv: %v", err)
			}
			t.Skipf("testenv: %v", err)
		}
	}
}

// testWriter returns a writer into the test's output that goes quiet once the test's
// cleanups have run, so a late log line from a supervisor goroutine cannot fail the test.
func testWriter(t testing.TB) io.Writer {
	w := &quietAfterCleanup{out: t.Output()}
	// Registered before the supervisor's cleanup, so it runs after it (cleanups run last
	// registered, first run).
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return w
}

type quietAfterCleanup struct {
	mu   sync.Mutex
	out  io.Writer
	done bool
}

func (w *quietAfterCleanup) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.out.Write(p)
}

// APIRequests returns how many requests of verb ("APPLY", "DELETE", …) on resource (plural,
// without a subresource) the kube-apiserver behind cfg has answered, whatever their code:
// the sum of its apiserver_request_total series for them.
func APIRequests(t testing.TB, cfg *rest.Config, verb, resource string) float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts, err := APIRequestCounts(ctx, cs.Discovery().RESTClient())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return counts[verb+" "+resource]
}

// APIRequestCounts reads the apiserver_request_total series of the kube-apiserver that rc
// (a clientset's Discovery().RESTClient()) talks to, summed by "VERB resource" or "VERB
// resource/subresource" whatever their code ("PUT leases", "PATCH nodes/status", "GET //readyz"
// for a path).
func APIRequestCounts(ctx context.Context, rc rest.Interface) (map[string]float64, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the kube-apiserver's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse the kube-apiserver's metrics: %w", err)
	}
	counts := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		key := have["verb"] + " " + have["resource"]
		if have["subresource"] != "" {
			key += "/" + have["subresource"]
		}
		counts[key] += m.GetCounter().GetValue()
	}
	return counts, nil
}
