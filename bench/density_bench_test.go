package bench

// The density benchmark of issue 16: how many clusters one `hostplane dev` holds registered,
// most of them hibernated, and how many awake and idle beside them.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const (
	envDensityRegistered = "HOSTPLANE_BENCH_DENSITY_REGISTERED" // clusters registered in all; default 200
	envDensityAwake      = "HOSTPLANE_BENCH_DENSITY_AWAKE"      // of them awake and idle; default 40
	envDensityWave       = "HOSTPLANE_BENCH_DENSITY_WAVE"       // clusters created at once; default 10
	// wakeConfigMap is written into the first sleeper before it hibernates; the wake reads it.
	wakeConfigMap = "before-sleep"
)

// BenchmarkDensity_RegisteredAndAwake registers HOSTPLANE_BENCH_DENSITY_REGISTERED
// SingleReplica clusters (default 200) on one `hostplane dev` stack (startStack: the six
// daemons and NATS in this process, control planes as processes) and keeps
// HOSTPLANE_BENCH_DENSITY_AWAKE of them (default 40) awake, the rest hibernated:
//
//  1. the sleepers, in waves of HOSTPLANE_BENCH_DENSITY_WAVE (default 10): created, Available,
//     then hibernated (PATCH spec.hibernation.enabled=true until Hibernated=True);
//  2. with only sleepers registered, HOSTPLANE_BENCH_IDLE seconds (default 30) of the
//     management's own idling: this process's CPU and RSS, per registered cluster;
//  3. the awake ones, in waves, all Available, HOSTPLANE_BENCH_SETTLE seconds to settle
//     (default 20), then HOSTPLANE_BENCH_IDLE seconds measured as BenchmarkIdleControlPlaneRSS
//     does (every replica's RSS, PSS and CPU);
//  4. one sleeper woken by a plain client-go GET (infrad's balancer holds it), with its time
//     (a first request that gives up is retried as a user would, and counted in that time).
//
// Every cluster is deleted at the end.
func BenchmarkDensity_RegisteredAndAwake(b *testing.B) {
	registered := testenv.EnvInt(b, envDensityRegistered, 200, 1)
	awake := testenv.EnvInt(b, envDensityAwake, 40, 0)
	if awake > registered {
		b.Fatalf("%s=%d is more than %s=%d", envDensityAwake, awake, envDensityRegistered, registered)
	}
	wave := testenv.EnvInt(b, envDensityWave, 10, 1)
	settle := time.Duration(testenv.EnvInt(b, envSettle, 20, 0)) * time.Second
	idle := time.Duration(testenv.EnvInt(b, envIdle, 30, 1)) * time.Second
	_, c := startStack(b, nil)
	var names []string
	b.Cleanup(func() {
		start := time.Now()
		if err := c.deleteAll(names); err != nil {
			b.Error(err)
		}
		detail(b, "%d clusters deleted in %s", len(names), time.Since(start).Round(time.Second))
	})
	b.ResetTimer()

	// 1. The sleepers.
	start, cpu := time.Now(), readCPU()
	var sleepers []string
	for i := 0; i < registered-awake; i += wave {
		batch := make([]string, 0, wave)
		for j := i; j < min(i+wave, registered-awake); j++ {
			batch = append(batch, fmt.Sprintf("dense-%03d", j))
		}
		names = append(names, batch...)
		c.createAvailable(b, batch...)
		if i == 0 {
			// What the wake at the end reads back.
			writeConfigMap(b, guestClient(b, c, batch[0]).CoreV1().ConfigMaps(metav1.NamespaceDefault), wakeConfigMap)
		}
		for _, name := range batch {
			if _, err := c.api.PatchCluster(context.Background(), name, map[string]any{
				"spec": map[string]any{"hibernation": map[string]any{"enabled": true}},
			}); err != nil {
				b.Fatal(err)
			}
		}
		for _, name := range batch {
			if _, err := c.waitCondition(name, api.ConditionHibernated, hibernateTimeout); err != nil {
				b.Fatal(err)
			}
		}
		sleepers = append(sleepers, batch...)
		if len(sleepers)%(5*wave) == 0 || len(sleepers) == registered-awake {
			detail(b, "%d hibernated after %s; this process %d MiB; %s",
				len(sleepers), time.Since(start).Round(time.Second), selfRSS()/1024, cpu.machine())
		}
	}
	tookSleepers := time.Since(start)

	// 2. The management alone with its sleepers.
	var mgmtCPU float64
	if len(sleepers) > 0 {
		cpu0, _ := cpuSeconds("self")
		machine := readCPU()
		time.Sleep(idle) // idling is what is measured, not a synchronisation
		cpu1, _ := cpuSeconds("self")
		mgmtCPU = 100 * (cpu1 - cpu0) / idle.Seconds()
		rss := float64(selfRSS()) / 1024
		n := float64(len(sleepers))
		b.ReportMetric(mgmtCPU, "mgmt-idle-cpu-%")
		b.ReportMetric(rss, "mgmt-rss-MiB")
		b.ReportMetric(1024*rss/n, "mgmt-KiB/registered-cluster")
		b.ReportMetric(100*mgmtCPU/n, "mgmt-idle-cpu-%/100-clusters")
		detail(b, "%d clusters registered, all hibernated: this process (six daemons, NATS) %.0f MiB RSS (%.2f MiB per cluster), "+
			"%.2f%% of a core while idle (%.3f%% per cluster); no control-plane process runs; machine MemAvailable %d MiB; %s",
			len(sleepers), rss, rss/n, mgmtCPU, mgmtCPU/n, memAvailableMiB(), machine.machine())
	}

	// 3. The awake ones beside them.
	var woke []string
	start = time.Now()
	for i := 0; i < awake; i += wave {
		batch := make([]string, 0, wave)
		for j := i; j < min(i+wave, awake); j++ {
			batch = append(batch, fmt.Sprintf("dense-awake-%02d", j))
		}
		names = append(names, batch...)
		c.createAvailable(b, batch...)
		woke = append(woke, batch...)
	}
	if len(woke) > 0 {
		detail(b, "%d awake clusters Available %s after the first POST, beside %d hibernated; %s",
			len(woke), time.Since(start).Round(time.Second), len(sleepers), cpu.machine())
		time.Sleep(settle) // settling is what is waited for, not a synchronisation
		sampleIdle(b, c, woke, idle)
		detail(b, "with %d awake and %d hibernated: machine MemAvailable %d MiB", len(woke), len(sleepers), memAvailableMiB())
	}

	// 4. A sleeper answers a plain GET, woken on connect.
	if len(sleepers) > 0 {
		name := sleepers[0]
		cms := guestClient(b, c, name).CoreV1().ConfigMaps(metav1.NamespaceDefault)
		m := readCPU()
		got := getConfigMap(cms, wakeConfigMap)
		took, outcome := got.took, "answered"
		if got.err != nil {
			// As a user would: the first request gave up (client-go's 10 s TLS handshake bound
			// on a busy machine); a retry joins the wake under way.
			answered, err := retryUntilAnswered(cms, wakeConfigMap, got.start.Add(got.took))
			if err != nil {
				b.Fatalf("GET through %s's kubeconfig while it hibernates, %d clusters registered: %v after %s, and every retry failed: %v",
					name, registered, got.err, got.took, err)
			}
			took, outcome = answered.Sub(got.start), fmt.Sprintf("first request FAILED (%v) after %s; a retry answered", got.err, got.took.Round(time.Millisecond))
		}
		b.ReportMetric(seconds(took), "wake-s")
		detail(b, "a hibernated cluster (%s), woken on connect by a client-go GET with %d awake beside it: %s, %s after the first request; %s",
			name, len(woke), outcome, took.Round(time.Millisecond), m.machine())
	}
	b.StopTimer()
	b.ReportMetric(seconds(tookSleepers), "register-hibernated-s")
	b.ReportMetric(0, "ns/op")
	detail(b, "registered %d (%d hibernated in %s, %d awake)", len(names), len(sleepers), tookSleepers.Round(time.Second), len(woke))
}

// memAvailableMiB is /proc/meminfo's MemAvailable in MiB (0 if unreadable).
func memAvailableMiB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib / 1024
		}
	}
	return 0
}
