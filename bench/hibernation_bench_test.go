package bench

// The wake-on-connect benchmark of issue 16 (docs/hibernation.md): how long a plain client-go
// request to a hibernated cluster waits for its answer, next to the floor of the same run.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// Bounds of the wake benchmark: reaching Hibernated, and a user's retries after a failed
// first request (the balancer holds a connection 60 s at most).
const (
	hibernateTimeout = 2 * time.Minute
	wakeRetryFor     = time.Minute
)

// BenchmarkHibernation_WakeOnConnect creates one SingleReplica cluster of the newest release
// through `hostplane dev`, writes a ConfigMap into it, then HOSTPLANE_BENCH_RUNS times
// (default 10): hibernates it (PATCH spec.hibernation.enabled=true until its Hibernated
// condition is True), measures the floor while it sleeps (startFloor: the same release's
// bare etcd + kube-apiserver, until /readyz passes), and then, on the clock, GETs the
// ConfigMap with client-go through the admin kubeconfig the API handed out before the first
// hibernation: from the request's start until its answer. That request wakes the cluster
// (infrad's balancer holds its connection until kube-apiserver is ready); the next round
// starts once the cluster is Available again.
//
// A first request that fails (client-go gives up on a TLS handshake after 10 s) counts as a
// failure; the benchmark retries like a user until an answer, and that wake's time is the
// time until the retry's answer, so failures raise the quantiles rather than drop out of
// them. Metrics: p50 and p90 of the wakes, p50 and p90 of the floor, the p50 ratio, the
// failures, and p50 of PATCH → Hibernated=True.
func BenchmarkHibernation_WakeOnConnect(b *testing.B) {
	runs := testenv.EnvInt(b, envRuns, 10, 1)
	rel := benchReleaseOf(b)
	if latest := release.Latest().Version; latest != rel.Version {
		b.Fatalf("the newest release is %s, the benchmark clusters run %s", latest, rel.Version)
	}
	_, c := startStack(b, nil)
	const name, configMap = "bench-sleepy", "before-sleep"
	b.Cleanup(func() {
		if err := c.deleteAll([]string{name}); err != nil {
			b.Error(err)
		}
	})
	c.createAvailable(b, name)
	cms := guestClient(b, c, name).CoreV1().ConfigMaps(metav1.NamespaceDefault)
	writeConfigMap(b, cms, configMap)

	var wakes, floors, hibernations []time.Duration
	var failures []string
	b.ResetTimer()
	for i := range runs {
		patch := time.Now()
		if _, err := c.api.PatchCluster(context.Background(), name, map[string]any{
			"spec": map[string]any{"hibernation": map[string]any{"enabled": true}},
		}); err != nil {
			b.Fatal(err)
		}
		hibernated, err := c.waitCondition(name, api.ConditionHibernated, hibernateTimeout)
		if err != nil {
			b.Fatal(err)
		}
		hibernations = append(hibernations, hibernated.Sub(patch))

		cpuFloor := readCPU()
		floor, _ := startFloor(b, rel)
		floorLoad := cpuFloor.machine()
		floors = append(floors, floor)

		cpuWake := readCPU()
		first := getConfigMap(cms, configMap)
		wakeLoad := cpuWake.machine()
		wake, outcome := first.took, "answered"
		if first.err != nil {
			failures = append(failures, fmt.Sprintf("wake %d: %v after %s", i+1, first.err, first.took.Round(time.Millisecond)))
			answered, err := retryUntilAnswered(cms, configMap, first.start.Add(first.took))
			if err != nil {
				b.Fatalf("wake %d: the first request failed (%v) and so did every retry for %s: %v", i+1, first.err, wakeRetryFor, err)
			}
			wake = answered.Sub(first.start)
			outcome = fmt.Sprintf("FAILED (%v) after %s; a retry answered", first.err, first.took.Round(time.Millisecond))
		}
		wakes = append(wakes, wake)
		if _, err := c.waitAvailable(name, availableTimeout); err != nil {
			b.Fatal(err)
		}
		cl, err := c.api.GetCluster(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		if h := cl.Status.Hibernation; h == nil || h.Reason != api.HibernationReasonConnection {
			b.Fatalf("wake %d: status.hibernation %+v, want reason %s", i+1, h, api.HibernationReasonConnection)
		}
		detail(b, "wake %d: PATCH → Hibernated %s; floor %s (%s); GET %s: %s, TLS handshake %s, connection reused %v (%s)", i+1,
			hibernations[i].Round(time.Millisecond), floor.Round(time.Millisecond), floorLoad, outcome,
			wake.Round(time.Millisecond), first.handshake.Round(time.Millisecond), first.reused, wakeLoad)
	}
	b.StopTimer()

	ws, fs, hs := sortedCopy(wakes), sortedCopy(floors), sortedCopy(hibernations)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	b.Logf("%d wakes, %d first requests failed (retried), one run:\n"+
		"%-34s %8s %8s %8s %8s\n"+
		"%-34s %8s %8s %8s %8s\n"+
		"%-34s %8s %8s %8s %8s\n"+
		"%-34s %8s %8s %8s %8s",
		runs, len(failures), "", "p50", "p90", "min", "max",
		"wake: GET → answer", ms(quantile(ws, 0.5)), ms(quantile(ws, 0.9)), ms(ws[0]), ms(ws[len(ws)-1]),
		"floor: etcd + kube-apiserver", ms(quantile(fs, 0.5)), ms(quantile(fs, 0.9)), ms(fs[0]), ms(fs[len(fs)-1]),
		"hibernate: PATCH → Hibernated", ms(quantile(hs, 0.5)), ms(quantile(hs, 0.9)), ms(hs[0]), ms(hs[len(hs)-1]))
	if len(failures) > 0 {
		detail(b, "first requests that failed:\n%s", strings.Join(failures, "\n"))
	}
	b.ReportMetric(seconds(quantile(ws, 0.5)), "wake-p50-s")
	b.ReportMetric(seconds(quantile(ws, 0.9)), "wake-p90-s")
	b.ReportMetric(seconds(quantile(fs, 0.5)), "floor-p50-s")
	b.ReportMetric(seconds(quantile(fs, 0.9)), "floor-p90-s")
	b.ReportMetric(seconds(quantile(ws, 0.5))/seconds(quantile(fs, 0.5)), "p50-ratio")
	b.ReportMetric(float64(len(failures)), "failed-first-requests")
	b.ReportMetric(seconds(quantile(hs, 0.5)), "hibernate-p50-s")
	b.ReportMetric(0, "ns/op")
}

// timedGet is one client-go GET: when it started, how long until its answer (or error), the
// TLS handshake's duration and whether the connection was reused from an earlier request.
type timedGet struct {
	start     time.Time
	took      time.Duration
	handshake time.Duration
	reused    bool
	err       error
}

// writeConfigMap writes the ConfigMap name that getConfigMap looks for.
func writeConfigMap(b *testing.B, cms corev1client.ConfigMapInterface, name string) {
	b.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"written": name}}
	if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// getConfigMap GETs the named ConfigMap and checks it is the one written
// before (writeConfigMap); the transport's events are traced (they may come from its dialing goroutine).
func getConfigMap(cms corev1client.ConfigMapInterface, name string) timedGet {
	var mu sync.Mutex
	var g timedGet
	var tlsStart time.Time
	trace := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			g.reused = i.Reused
		},
		TLSHandshakeStart: func() {
			mu.Lock()
			defer mu.Unlock()
			tlsStart = time.Now()
		},
		TLSHandshakeDone: func(tls.ConnectionState, error) {
			mu.Lock()
			defer mu.Unlock()
			g.handshake = time.Since(tlsStart)
		},
	}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	start := time.Now()
	got, err := cms.Get(ctx, name, metav1.GetOptions{})
	took := time.Since(start)
	if err == nil && got.Data["written"] != name {
		err = fmt.Errorf("ConfigMap %s holds %v, not what was written before", name, got.Data)
	}
	mu.Lock()
	defer mu.Unlock()
	g.start, g.took, g.err = start, took, err
	return g
}

// retryUntilAnswered repeats the GET, as a user would after a failed one, until one is
// answered or wakeRetryFor passed since from; it returns when the answer came, or the last
// error.
func retryUntilAnswered(cms corev1client.ConfigMapInterface, name string, from time.Time) (time.Time, error) {
	err := errors.New("no retry")
	for time.Since(from) < wakeRetryFor {
		g := getConfigMap(cms, name)
		if g.err == nil {
			return g.start.Add(g.took), nil
		}
		err = g.err
		time.Sleep(time.Second) // a user's pause between two attempts
	}
	return time.Time{}, fmt.Errorf("the last retry: %w", err)
}
