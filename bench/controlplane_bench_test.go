package bench

// The control-plane benchmarks of issue 3, in the order they run: one create at a time
// against the floor, idle memory, then many creates at once (last, so its load does not
// spill into the others).

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// BenchmarkClusterCreateToAvailable measures POST /v1/clusters → Available=True of a
// SingleReplica cluster through `hostplane dev`, over HOSTPLANE_BENCH_RUNS runs (default
// 10), each followed by DELETE until GET answers 404. In the same run, interleaved with the
// creates, it measures the floor: the same release's etcd + kube-apiserver started by hand
// (pkg/localkube, fresh directory and supervisor) until kube-apiserver's /readyz passes.
//
// Metrics: median and p90 of both, their ratio (target ≤ 1.5), and the median delete time.
// The log shows each run and the median time of every milestone of a create (from the
// daemons' events).
func BenchmarkClusterCreateToAvailable(b *testing.B) {
	runs := testenv.EnvInt(b, envRuns, 10, 1)
	rel := benchReleaseOf(b)
	tl := newTimeline()
	_, c := startStack(b, tl)

	var creates, floors, deletes []time.Duration
	var timelines [][]time.Duration
	// started → probe passed of each process, and the floor's time before etcd starts
	// (certificates, files) and between etcd ready and kube-apiserver started.
	var etcdUp, kasUp, floorEtcdUp, floorKASUp, floorSetup, floorGap []time.Duration
	// probe passed → component Available (componentd noticing), per component; kube-apiserver
	// Available → the last of kcm and scheduler Available; that → the client seeing Available.
	lags := map[string][]time.Duration{}
	var kcmSched, toClient []time.Duration
	b.ResetTimer()
	for i := range runs {
		cpuFloor := readCPU()
		floor, ft := startFloor(b, rel)
		floorLoad := cpuFloor.machine()
		floors = append(floors, floor)
		fe, fk := ft.procs["floor-etcd"], ft.procs["floor-kube-apiserver"]
		floorEtcdUp = append(floorEtcdUp, fe["ready"].Sub(fe["started"]))
		floorKASUp = append(floorKASUp, fk["ready"].Sub(fk["started"]))
		floorSetup = append(floorSetup, fe["started"].Sub(ft.start))
		floorGap = append(floorGap, fk["started"].Sub(fe["ready"]))

		name := fmt.Sprintf("bench-create-%d", i)
		cpuCreate := readCPU()
		post := time.Now()
		if err := c.create(name); err != nil {
			b.Fatal(err)
		}
		avail, err := c.waitAvailable(name, availableTimeout)
		if err != nil {
			b.Fatal(err)
		}
		create := avail.Sub(post)
		createLoad := cpuCreate.machine()
		creates = append(creates, create)
		ms := tl.of(name)
		timelines = append(timelines, phases(ms, post, avail))
		etcdUp = append(etcdUp, ms["process.ready/etcd"].Sub(ms["process.started/etcd"]))
		kasUp = append(kasUp, ms["process.ready/kube-apiserver"].Sub(ms["process.started/kube-apiserver"]))
		for _, comp := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
			lags[comp] = append(lags[comp], ms["component.available/"+comp].Sub(ms["process.ready/"+comp]))
		}
		last := ms["component.available/"+api.ComponentControllerManager]
		if t := ms["component.available/"+api.ComponentScheduler]; t.After(last) {
			last = t
		}
		kcmSched = append(kcmSched, last.Sub(ms["component.available/"+api.ComponentKubeAPIServer]))
		toClient = append(toClient, avail.Sub(last))

		del := time.Now()
		if err := c.delete(name); err != nil {
			b.Fatal(err)
		}
		if err := c.waitGone(name, deleteTimeout); err != nil {
			b.Fatal(err)
		}
		deletes = append(deletes, time.Since(del))
		detail(b, "run %d: create→Available %s (%s), floor %s (%s), delete→404 %s", i+1,
			create.Round(time.Millisecond), createLoad, floor.Round(time.Millisecond), floorLoad, deletes[i].Round(time.Millisecond))
	}
	b.StopTimer()

	cs, fs, ds := sortedCopy(creates), sortedCopy(floors), sortedCopy(deletes)
	detail(b, "median time of each milestone of a create, since the POST, over %d runs:\n%s", runs, phaseTable(timelines))
	med := func(ds []time.Duration) time.Duration { return quantile(sortedCopy(ds), 0.5).Round(time.Millisecond) }
	detail(b, "medians, process started → probe passed: etcd %s in hostplane, %s in the floor; kube-apiserver %s in hostplane, %s in the floor.\n"+
		"The floor spends %s before etcd starts (certificates, files) and %s from etcd ready to kube-apiserver started.",
		med(etcdUp), med(floorEtcdUp), med(kasUp), med(floorKASUp), med(floorSetup), med(floorGap))
	detail(b, "medians, probe passed → componentd records the component Available: etcd %s, kube-apiserver %s, kcm %s, scheduler %s.\n"+
		"kube-apiserver Available → kcm and scheduler Available (not in the floor): %s; → the client sees Available=True: %s.",
		med(lags[api.ComponentEtcd]), med(lags[api.ComponentKubeAPIServer]), med(lags[api.ComponentControllerManager]),
		med(lags[api.ComponentScheduler]), med(kcmSched), med(toClient))
	b.ReportMetric(seconds(quantile(cs, 0.5)), "create-p50-s")
	b.ReportMetric(seconds(quantile(cs, 0.9)), "create-p90-s")
	b.ReportMetric(seconds(quantile(fs, 0.5)), "floor-p50-s")
	b.ReportMetric(seconds(quantile(fs, 0.9)), "floor-p90-s")
	b.ReportMetric(seconds(quantile(cs, 0.5))/seconds(quantile(fs, 0.5)), "p50-ratio")
	b.ReportMetric(seconds(quantile(cs, 0.9))/seconds(quantile(fs, 0.9)), "p90-ratio")
	b.ReportMetric(seconds(quantile(ds, 0.5)), "delete-p50-s")
	b.ReportMetric(0, "ns/op")
}

// startFloor starts etcd + kube-apiserver of rel by hand in a fresh directory with a fresh
// supervisor, returns how long localkube.Start took (certificates, etcd /health,
// kube-apiserver /readyz) with the supervisor's timeline of it, and stops both.
func startFloor(b *testing.B, rel release.Release) (time.Duration, *floorTimeline) {
	b.Helper()
	dir := b.TempDir()
	ft := &floorTimeline{timeline: newTimeline()}
	log := slog.New(&tapHandler{Handler: slog.DiscardHandler, tl: ft.timeline})
	sup, err := process.NewSupervisor(filepath.Join(dir, "run"), log)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ft.start = time.Now()
	cl, err := localkube.Start(ctx, localkube.Config{Dir: filepath.Join(dir, "kube"), Release: rel, Supervisor: sup, Name: "floor", Log: log})
	took := time.Since(ft.start)
	if err != nil {
		_ = sup.StopAll(ctx)
		_ = sup.Close()
		b.Fatal(err)
	}
	if err := cl.Stop(ctx); err != nil {
		b.Error(err)
	}
	if err := sup.StopAll(ctx); err != nil {
		b.Error(err)
	}
	if err := sup.Close(); err != nil {
		b.Error(err)
	}
	return took, ft
}

// floorTimeline is a floor run's timeline and when localkube.Start was called.
type floorTimeline struct {
	*timeline
	start time.Time
}

// idleWait is how long the clusters idle after all are Available before RSS is sampled.
const idleWait = 10 * time.Second

// BenchmarkIdleControlPlaneRSS measures the resident memory of idle SingleReplica control
// planes and of `hostplane dev` itself (the six daemons and NATS in one process — this
// benchmark's process; no management apiserver) at 0, 1 and 10 clusters, and 30 with
// HOSTPLANE_BENCH_MANY=1. One stack serves every step: each step creates the clusters it
// lacks, waits until all are Available, idles 10 s, then sums VmRSS of every replica pid
// that GET /v1/clusters/{c}/components reports.
func BenchmarkIdleControlPlaneRSS(b *testing.B) {
	counts := []int{0, 1, 10}
	if os.Getenv(envMany) == "1" {
		counts = append(counts, 30)
	}
	_, c := startStack(b, nil)
	var names []string
	b.Cleanup(func() {
		if err := c.deleteAll(names); err != nil {
			b.Error(err)
		}
	})
	for _, n := range counts {
		b.Run("clusters="+strconv.Itoa(n), func(b *testing.B) {
			var added []string
			for i := len(names); i < n; i++ {
				name := fmt.Sprintf("bench-rss-%d", i)
				if err := c.create(name); err != nil {
					b.Fatal(err)
				}
				names = append(names, name)
				added = append(added, name)
			}
			start := time.Now()
			if _, err := c.waitAllAvailable(names, time.Second, availableTimeout); err != nil {
				b.Fatal(err)
			}
			if len(added) > 0 {
				detail(b, "%d new clusters Available after %s", len(added), time.Since(start).Round(time.Second))
			}
			sampleIdle(b, c, names, idleWait)
		})
	}
}

// sampleIdle lets the clusters idle for idle, then reports the control planes' RSS
// (total, per cluster and per component) and this process's, and the CPU both used while
// idling.
func sampleIdle(b *testing.B, c *client, names []string, idleWait time.Duration) {
	b.Helper()
	type proc struct{ pid, comp string }
	var procs []proc
	for _, name := range names {
		comps, err := c.components(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, comp := range comps {
			for _, r := range comp.Status.Replicas {
				if r.Pid == 0 {
					b.Fatalf("%s/%s replica %s has no pid", name, comp.Name, r.Name)
				}
				procs = append(procs, proc{strconv.Itoa(r.Pid), comp.Name})
			}
		}
	}
	cpuOf := func() (perComp map[string]float64, cp, self float64) {
		perComp = map[string]float64{}
		for _, p := range procs {
			s, err := cpuSeconds(p.pid)
			if err != nil {
				b.Fatalf("%s pid %s: %v", p.comp, p.pid, err)
			}
			perComp[p.comp] += s
			cp += s
		}
		self, err := cpuSeconds("self")
		if err != nil {
			b.Fatal(err)
		}
		return perComp, cp, self
	}
	machine := readCPU()
	comp0, cp0, self0 := cpuOf()
	start := time.Now()
	time.Sleep(idleWait) // idling is what is measured, not a synchronisation
	comp1, cp1, self1 := cpuOf()
	idle := time.Since(start).Seconds()
	load := machine.machine()

	perComponent, anon, pss := map[string]int64{}, map[string]int64{}, map[string]int64{}
	var total, totalPSS int64
	for _, p := range procs {
		kib, err := rssKiB(p.pid)
		if err != nil {
			b.Fatalf("%s pid %s: %v", p.comp, p.pid, err)
		}
		a, err := statusKiB(p.pid, "RssAnon")
		if err != nil {
			b.Fatalf("%s pid %s: %v", p.comp, p.pid, err)
		}
		ps, err := pssKiB(p.pid)
		if err != nil {
			b.Fatalf("%s pid %s: %v", p.comp, p.pid, err)
		}
		perComponent[p.comp] += kib
		anon[p.comp] += a
		pss[p.comp] += ps
		total += kib
		totalPSS += ps
	}
	self, err := rssKiB("self")
	if err != nil {
		b.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	n := float64(max(1, len(names)))

	b.ReportMetric(mib(self), "hostplane-rss-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "hostplane-heap-MiB")
	b.ReportMetric(100*(self1-self0)/idle, "hostplane-idle-cpu-%")
	if len(names) > 0 {
		b.ReportMetric(mib(total), "cp-total-MiB")
		b.ReportMetric(mib(total)/n, "cp-MiB/cluster")
		b.ReportMetric(mib(totalPSS)/n, "cp-PSS-MiB/cluster")
		for comp, unit := range map[string]string{
			api.ComponentEtcd: "etcd-MiB", api.ComponentKubeAPIServer: "kas-MiB",
			api.ComponentControllerManager: "kcm-MiB", api.ComponentScheduler: "sched-MiB",
		} {
			b.ReportMetric(mib(perComponent[comp])/n, unit)
		}
		b.ReportMetric(100*(cp1-cp0)/idle/n, "cp-idle-cpu-%/cluster")
	}
	var perCompCPU, perCompRSS []string
	for _, comp := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
		perCompCPU = append(perCompCPU, fmt.Sprintf("%s %.2f%%", comp, 100*(comp1[comp]-comp0[comp])/idle/n))
		perCompRSS = append(perCompRSS, fmt.Sprintf("%s %.0f (anon %.0f, PSS %.0f)", comp, mib(perComponent[comp])/n, mib(anon[comp])/n, mib(pss[comp])/n))
	}
	b.ReportMetric(0, "ns/op")
	detail(b, "%d clusters, %d processes: control planes %.0f MiB RSS (%.0f MiB each; PSS %.0f MiB each), %.1f%% of a core each while idle (%s); "+
		"MiB each: %s; hostplane dev %.0f MiB (Go heap in use %.0f MiB), %.1f%% of a core; %s",
		len(names), len(procs), mib(total), mib(total)/n, mib(totalPSS)/n, 100*(cp1-cp0)/idle/n, strings.Join(perCompCPU, ", "), strings.Join(perCompRSS, ", "),
		mib(self), float64(ms.HeapInuse)/(1<<20), 100*(self1-self0)/idle, load)
}

// BenchmarkIdleControlPlaneTuning measures what the release catalogue's component tuning
// saves: for each variant of HOSTPLANE_BENCH_TUNING (release.ParseSelection syntax, ";"
// between variants; default "none;all", i.e. without any setting, then with all), back to
// back in one run, it starts a stack of its own whose componentd applies that selection,
// creates HOSTPLANE_BENCH_TUNING_CLUSTERS SingleReplica clusters (default 2), waits until
// all are Available, lets them settle HOSTPLANE_BENCH_SETTLE seconds (default 20: kube-
// controller-manager's first passes over a new cluster are not idling), then measures
// HOSTPLANE_BENCH_IDLE seconds (default 30) of idling as BenchmarkIdleControlPlaneRSS does,
// and deletes the clusters and stops the stack.
func BenchmarkIdleControlPlaneTuning(b *testing.B) {
	variants := strings.Split(cmp.Or(os.Getenv(envTuning), "none;all"), ";")
	n := testenv.EnvInt(b, envTuningClusters, 2, 1)
	settle := time.Duration(testenv.EnvInt(b, envSettle, 20, 0)) * time.Second
	idle := time.Duration(testenv.EnvInt(b, envIdle, 30, 1)) * time.Second
	for i, v := range variants {
		sel, err := release.ParseSelection(v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%d/tuning=%s", i, sel), func(b *testing.B) {
			_, c := startStackWith(b, nil, dev.Config{ComponentTuning: sel.String()})
			var names []string
			b.Cleanup(func() {
				if err := c.deleteAll(names); err != nil {
					b.Error(err)
				}
			})
			for j := range n {
				name := fmt.Sprintf("bench-tuning-%d-%d", i, j)
				if err := c.create(name); err != nil {
					b.Fatal(err)
				}
				names = append(names, name)
			}
			if _, err := c.waitAllAvailable(names, time.Second, availableTimeout); err != nil {
				b.Fatal(err)
			}
			time.Sleep(settle) // settling is what is waited for, not a synchronisation
			sampleIdle(b, c, names, idle)
		})
	}
}

// BenchmarkConcurrentCreate creates HOSTPLANE_BENCH_CONCURRENT SingleReplica clusters
// (default 20) at once and measures the time from the first POST until the first, the
// median and the last is Available (polling the list every 250 ms), then deletes them all
// and measures the time until every one answers 404.
func BenchmarkConcurrentCreate(b *testing.B) {
	n := testenv.EnvInt(b, envConcurrent, 20, 1)
	tl := newTimeline()
	_, c := startStack(b, tl)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-conc-%d", i)
	}
	deleted := false
	b.Cleanup(func() {
		if !deleted {
			_ = c.deleteAll(names)
		}
	})

	b.ResetTimer()
	cpu := readCPU()
	start := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = c.create(name) })
	}
	wg.Wait()
	posted := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	seen, err := c.waitAllAvailable(names, 250*time.Millisecond, availableTimeout)
	load := cpu.machine()
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	var runs [][]time.Duration
	for _, name := range names {
		took = append(took, seen[name].Sub(start))
		runs = append(runs, phases(tl.of(name), start, seen[name]))
	}
	slices.Sort(took)
	detail(b, "%d POSTs answered within %s; Available: first %s, median %s, last %s (%s)", n,
		posted.Round(time.Millisecond), took[0].Round(time.Millisecond), quantile(took, 0.5).Round(time.Millisecond),
		took[n-1].Round(time.Millisecond), load)
	detail(b, "median time of each milestone, since the first POST, over the %d clusters:\n%s", n, phaseTable(runs))

	del := time.Now()
	if err := c.deleteAll(names); err != nil {
		b.Fatal(err)
	}
	deleted = true
	deleteAll := time.Since(del)
	b.StopTimer()

	b.ReportMetric(seconds(took[0]), "first-available-s")
	b.ReportMetric(seconds(quantile(took, 0.5)), "median-available-s")
	b.ReportMetric(seconds(took[n-1]), "all-available-s")
	b.ReportMetric(seconds(deleteAll), "all-deleted-s")
	b.ReportMetric(0, "ns/op")
}
