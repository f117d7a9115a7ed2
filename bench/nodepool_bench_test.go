package bench

// The NodePool benchmarks of issue 4, cheapest first: Ignition serving next to a bare Go
// HTTPS server, create → all nodes Ready of one pool (3 and 30 replicas), then a fleet of
// 500 machines in 25 pools of 5 clusters. Each starts its own `hostplane dev` with the
// management kube-apiserver (Cluster API runs in nodepoold), drives it through the HTTP API
// with the admin token, and stops it at the end.

import (
	"cmp"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// Environment knobs of the NodePool benchmarks.
const (
	envPoolRuns      = "HOSTPLANE_BENCH_POOL_RUNS"      // creates per pool size; default 5
	envIgnitionReqs  = "HOSTPLANE_BENCH_IGNITION_REQS"  // requests per server; default 20000
	envFleetMinutes  = "HOSTPLANE_BENCH_FLEET_MINUTES"  // cap on waiting for the fleet; default 20
	envSteadySeconds = "HOSTPLANE_BENCH_STEADY_SECONDS" // steady-state window; default 60
	envFleetReplicas = "HOSTPLANE_BENCH_FLEET_REPLICAS" // machines per pool of the fleet; default 20
)

const (
	poolReadyTimeout = 15 * time.Minute
	ignitionWorkers  = 8
)

// startPoolStack starts `hostplane dev` with its management kube-apiserver (nodepoold's
// Cluster API needs it) on a temp data dir, and returns it, a client and the data dir.
// Options adjust the stack's config (e.g. its KarpenterBinary) before it starts.
func startPoolStack(b *testing.B, opts ...func(*dev.Config)) (*dev.Stack, *client, string) {
	b.Helper()
	benchReleaseOf(b)
	dir := b.TempDir()
	cfg := dev.Config{DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1, Logger: stackLogger(b)}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := dev.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Stop(context.Background()) })
	c := newClient(b, s)
	testenv.Eventually(b, 2*time.Minute, func() bool {
		code, _, err := c.do(http.MethodGet, "/healthz", "", nil)
		return err == nil && code == http.StatusOK
	}, "hostplane dev never became healthy")
	return s, c, dir
}

// createAvailable creates SingleReplica clusters at once and waits until all are Available.
func (c *client) createAvailable(b *testing.B, names ...string) {
	b.Helper()
	for _, n := range names {
		if err := c.create(n); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.waitAllAvailable(names, time.Second, availableTimeout); err != nil {
		b.Fatal(err)
	}
}

// createPool asks for a pool of replicas machines of benchRelease, replaced on upgrade.
func (c *client) createPool(cluster, pool string, replicas int) error {
	body := fmt.Sprintf(`{"name":%q,"spec":{"replicas":%d,"release":{"version":%q},"management":{"upgradeType":"Replace"}}}`,
		pool, replicas, benchRelease)
	code, resp, err := c.do(http.MethodPost, "/v1/clusters/"+cluster+"/nodepools", body, nil)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("create nodepool %s/%s: %d %s", cluster, pool, code, resp)
	}
	return nil
}

func (c *client) pool(cluster, pool string) (api.NodePool, int, error) {
	var np api.NodePool
	code, _, err := c.do(http.MethodGet, "/v1/clusters/"+cluster+"/nodepools/"+pool, "", &np)
	return np, code, err
}

// poolReady: every wanted replica has a Ready node and the pool says Ready=True.
func poolReady(np api.NodePool, want int) bool {
	return np.Status.ReadyReplicas == int32(want) && np.Status.Conditions.IsTrue(api.NodePoolConditionReady)
}

// waitPoolReady polls until the pool is ready with want replicas, and returns when it was
// first seen so.
func (c *client) waitPoolReady(cluster, pool string, want int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last api.NodePool
	for time.Now().Before(deadline) {
		np, code, err := c.pool(cluster, pool)
		if err == nil && code == http.StatusOK {
			if poolReady(np, want) {
				return time.Now(), nil
			}
			last = np
		}
		time.Sleep(pollInterval)
	}
	st, _ := json.Marshal(last.Status)
	return time.Time{}, fmt.Errorf("nodepool %s/%s not ready after %s; status: %s", cluster, pool, timeout, st)
}

// deletePool deletes the pool and polls until GET answers 404.
func (c *client) deletePool(cluster, pool string, timeout time.Duration) error {
	code, resp, err := c.do(http.MethodDelete, "/v1/clusters/"+cluster+"/nodepools/"+pool, "", nil)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted && code != http.StatusNotFound && code != http.StatusOK {
		return fmt.Errorf("delete nodepool %s/%s: %d %s", cluster, pool, code, resp)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, code, err := c.pool(cluster, pool); err == nil && code == http.StatusNotFound {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("nodepool %s/%s still there after %s", cluster, pool, timeout)
}

// BenchmarkNodePool_CreateToAllNodesReady measures POST of a pool → every replica's node
// Ready and the pool Ready=True, over HOSTPLANE_BENCH_POOL_RUNS creates (default 5) of a 3-
// and a 30-replica pool in one Available cluster; the pool is deleted (until 404) between
// runs. Metrics: median, min and max in seconds, and the median delete time.
func BenchmarkNodePool_CreateToAllNodesReady(b *testing.B) {
	for _, replicas := range []int{3, 30} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			runs := testenv.EnvInt(b, envPoolRuns, 5, 1)
			_, c, _ := startPoolStack(b)
			const cl = "bench-pools"
			c.createAvailable(b, cl)
			var creates, deletes []time.Duration
			b.ResetTimer()
			for i := range runs {
				pool := fmt.Sprintf("p%d", i)
				cpu := readCPU()
				post := time.Now()
				if err := c.createPool(cl, pool, replicas); err != nil {
					b.Fatal(err)
				}
				ready, err := c.waitPoolReady(cl, pool, replicas, poolReadyTimeout)
				if err != nil {
					b.Fatal(err)
				}
				creates = append(creates, ready.Sub(post))
				load := cpu.machine()
				del := time.Now()
				if err := c.deletePool(cl, pool, deleteTimeout); err != nil {
					b.Fatal(err)
				}
				deletes = append(deletes, time.Since(del))
				detail(b, "run %d: create→%d nodes Ready %s (%s), delete→404 %s", i+1, replicas,
					creates[i].Round(time.Millisecond), load, deletes[i].Round(time.Millisecond))
			}
			b.StopTimer()
			cs := sortedCopy(creates)
			b.ReportMetric(seconds(quantile(cs, 0.5)), "ready-p50-s")
			b.ReportMetric(seconds(cs[0]), "ready-min-s")
			b.ReportMetric(seconds(cs[len(cs)-1]), "ready-max-s")
			b.ReportMetric(seconds(quantile(sortedCopy(deletes), 0.5)), "delete-p50-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkIgnition_ServeCachedPayload measures GET /ignition against ignitiond's real
// per-cluster HTTPS server (a pool's current token, its payload cached after the machines'
// own fetches) next to a bare net/http HTTPS handler serving the same bytes, in the same
// run, with the same client settings: HTTP/1.1 over TLS with keep-alive, ignitionWorkers
// workers sharing HOSTPLANE_BENCH_IGNITION_REQS requests (default 20000) per server.
func BenchmarkIgnition_ServeCachedPayload(b *testing.B) {
	reqs := testenv.EnvInt(b, envIgnitionReqs, 20000, 1)
	s, c, _ := startPoolStack(b)
	const cl, pool = "bench-ign", "workers"
	c.createAvailable(b, cl)
	if err := c.createPool(cl, pool, 1); err != nil {
		b.Fatal(err)
	}
	if _, err := c.waitPoolReady(cl, pool, 1, poolReadyTimeout); err != nil {
		b.Fatal(err)
	}
	tok := ignitionTokens(b, s, cl+"."+pool)
	stub, err := ignition.ParseStub(tok.UserData)
	if err != nil {
		b.Fatal(err)
	}
	var cluster api.Cluster
	if code, resp, err := c.do(http.MethodGet, "/v1/clusters/"+cl, "", &cluster); err != nil || code != http.StatusOK {
		b.Fatalf("get cluster: %d %s %v", code, resp, err)
	}
	if cluster.Status.IgnitionEndpoint == "" {
		b.Fatal("no status.ignitionEndpoint")
	}
	realURL := "https://" + cluster.Status.IgnitionEndpoint + "/ignition"
	if stub.URL != realURL {
		b.Logf("stub URL %s, status endpoint URL %s", stub.URL, realURL)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(stub.CAPEM) {
		b.Fatal("no root CA in the stub")
	}

	// The payload, fetched once through ignitiond, is what the bare server serves.
	payload, err := fetchOnce(newIgnitionClient(roots), realURL, tok.Current.Token)
	if err != nil {
		b.Fatal(err)
	}
	bare := httptest.NewUnstartedServer(bareIgnitionHandler(tok.Current.Token, payload))
	bare.StartTLS()
	b.Cleanup(bare.Close)
	roots.AddCert(bare.Certificate())

	b.ResetTimer()
	// Alternate twice so both see the same machine; the second round is the one reported.
	var realRes, bareRes loadResult
	for round := range 2 {
		realRes = hammer(b, newIgnitionClient(roots), realURL, tok.Current.Token, reqs, len(payload))
		bareRes = hammer(b, newIgnitionClient(roots), bare.URL+"/ignition", tok.Current.Token, reqs, len(payload))
		detail(b, "round %d, payload %d bytes, %d workers × %d requests:\n  ignitiond: %s\n  bare net/http: %s",
			round+1, len(payload), ignitionWorkers, reqs, realRes, bareRes)
	}
	b.StopTimer()
	b.ReportMetric(realRes.rps, "ignitiond-req/s")
	b.ReportMetric(seconds(realRes.p99)*1000, "ignitiond-p99-ms")
	b.ReportMetric(bareRes.rps, "bare-req/s")
	b.ReportMetric(seconds(bareRes.p99)*1000, "bare-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// ignitionTokens reads a pool's token record from the "ignition" bucket.
func ignitionTokens(b *testing.B, s *dev.Stack, key string) api.IgnitionTokens {
	b.Helper()
	nc, err := s.ConnectNATS(b.Context(), natsauth.Admin)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "ignition")
	if err != nil {
		b.Fatal(err)
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		b.Fatalf("ignition record %s: %v", key, err)
	}
	var t api.IgnitionTokens
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		b.Fatal(err)
	}
	return t
}

// newIgnitionClient is the client both servers get: TLS trusting roots, HTTP/1.1,
// keep-alive with a connection per worker.
func newIgnitionClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        ignitionWorkers,
		MaxIdleConnsPerHost: ignitionWorkers,
		IdleConnTimeout:     time.Minute,
	}}
}

// bareIgnitionHandler checks the bearer token like ignitiond and serves payload.
func bareIgnitionHandler(token string, payload []byte) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json")
		_, _ = w.Write(payload)
	})
}

func fetchOnce(hc *http.Client, url, token string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body, nil
}

type loadResult struct {
	rps           float64
	p50, p99, max time.Duration
	elapsed       time.Duration
}

func (r loadResult) String() string {
	return fmt.Sprintf("%.0f req/s, p50 %s, p99 %s, max %s (%s)", r.rps, r.p50.Round(time.Microsecond),
		r.p99.Round(time.Microsecond), r.max.Round(time.Microsecond), r.elapsed.Round(time.Millisecond))
}

// hammer sends n GETs from ignitionWorkers workers, each checking a 200 with size bytes.
// One warm-up request per worker opens the connections first (not counted).
func hammer(b *testing.B, hc *http.Client, url, token string, n, size int) loadResult {
	b.Helper()
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		k, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || int(k) != size {
			return fmt.Errorf("GET %s: %d, %d bytes", url, resp.StatusCode, k)
		}
		return nil
	}
	var wg sync.WaitGroup
	for range ignitionWorkers {
		wg.Go(func() { _ = get() })
	}
	wg.Wait()

	var next atomic.Int64
	lat := make([][]time.Duration, ignitionWorkers)
	errs := make([]error, ignitionWorkers)
	start := time.Now()
	for w := range ignitionWorkers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := get(); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	all := sortedCopy(slices.Concat(lat...))
	return loadResult{rps: float64(len(all)) / elapsed.Seconds(), p50: quantile(all, 0.5), p99: quantile(all, 0.99),
		max: all[len(all)-1], elapsed: elapsed}
}

// BenchmarkFleet_500MachinesAcross25PoolsIn5Clusters creates 5 clusters, then 5 pools of 20
// replicas in each at once, and measures the time until all 500 nodes are Ready (or records
// how far it got within HOSTPLANE_BENCH_FLEET_MINUTES, default 20), then, over a steady
// window (HOSTPLANE_BENCH_STEADY_SECONDS, default 60), the CPU and RSS of this process (the
// daemons, Cluster API and the local cloud run in it) and the RSS of the processes under the
// data dir (guest control planes, the management kube-apiserver).
func BenchmarkFleet_500MachinesAcross25PoolsIn5Clusters(b *testing.B) {
	const clusters, poolsPer = 5, 5
	replicas := testenv.EnvInt(b, envFleetReplicas, 20, 1)
	total := clusters * poolsPer * replicas
	limit := time.Duration(testenv.EnvInt(b, envFleetMinutes, 20, 1)) * time.Minute
	steady := time.Duration(testenv.EnvInt(b, envSteadySeconds, 60, 1)) * time.Second
	stack, c, dir := startPoolStack(b)

	var names []string
	for i := range clusters {
		names = append(names, fmt.Sprintf("fleet-%d", i))
	}
	t0 := time.Now()
	c.createAvailable(b, names...)
	detail(b, "%d clusters Available in %s (%s); RSS: this process %d MiB, under the data dir %s",
		clusters, time.Since(t0).Round(time.Second), loadAverage(), selfRSS()/1024, dirRSS(dir))

	// The kube-apiservers whose requests are counted: read before the clock starts.
	mgmtCS, err := stack.Management.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	apiservers := map[string]rest.Interface{
		"the management kube-apiserver": mgmtCS.Discovery().RESTClient(),
		"kube-apiserver of " + names[0]: guestClient(b, c, names[0]).Discovery().RESTClient(),
	}
	mix0 := map[string]map[string]float64{}
	for who, rc := range apiservers {
		mix0[who] = requestMix(rc)
	}
	procs0 := dirCPU(dir)

	b.ResetTimer()
	post := time.Now()
	cpu := readCPU()
	selfCPU0, _ := cpuSeconds("self")
	// Every pool of every cluster at once, as a fleet's automation would: ignitiond sweeps a
	// bootstrap token only once its pool is gone, so pools of one cluster created together
	// all join (the first run of this benchmark found they did not).
	var wg sync.WaitGroup
	errs := make([]error, len(names)*poolsPer)
	for i, cl := range names {
		for p := range poolsPer {
			wg.Go(func() { errs[i*poolsPer+p] = c.createPool(cl, fmt.Sprintf("pool-%d", p), replicas) })
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	detail(b, "all %d pools created in %s", clusters*poolsPer, time.Since(post).Round(time.Millisecond))
	var samples []string
	ready, machines := 0, 0
	lastLog := time.Time{}
	reached := false
	for time.Since(post) < limit {
		ready, machines = fleetCount(c, names, poolsPer)
		if time.Since(lastLog) >= 30*time.Second || ready == total {
			selfCPU, _ := cpuSeconds("self")
			samples = append(samples, fmt.Sprintf("%6s  ready %3d  machines %3d  self RSS %5d MiB  self CPU %6.0f s  %s",
				time.Since(post).Round(time.Second), ready, machines, selfRSS()/1024, selfCPU-selfCPU0, cpu.machine()))
			fmt.Println("    fleet progress:", samples[len(samples)-1])
			lastLog = time.Now()
		}
		if ready == total {
			reached = true
			break
		}
		time.Sleep(2 * time.Second)
	}
	took := time.Since(post)
	detail(b, "ready nodes over time since the pools' POSTs:\n%s", strings.Join(samples, "\n"))
	detail(b, "CPU used from the pools' POSTs to the last Ready node (%s), by process:\n%s",
		took.Round(time.Second), cpuTable(procs0, dirCPU(dir), ready))
	for who, rc := range apiservers {
		detail(b, "requests %s answered over the same time, per second, the most frequent:\n%s",
			who, mixTable(mix0[who], requestMix(rc), took, 12))
	}
	b.StopTimer()
	if reached {
		b.ReportMetric(seconds(took), "all-ready-s")
	} else {
		detail(b, "NOT all Ready: %d of %d after %s (%d machines)", ready, total, took.Round(time.Second), machines)
	}
	b.ReportMetric(float64(ready), "ready-nodes")

	// Steady state: CPU and RSS over the window, by process, and the requests answered.
	c0, _ := cpuSeconds("self")
	m0 := readCPU()
	procs0 = dirCPU(dir)
	for who, rc := range apiservers {
		mix0[who] = requestMix(rc)
	}
	time.Sleep(steady)
	c1, _ := cpuSeconds("self")
	procs1 := dirCPU(dir)
	end, _ := fleetCount(c, names, poolsPer)
	detail(b, "steady %s (%d nodes Ready at its end): this process %.2f cores (%.1f CPU-s), RSS %d MiB; %s\nunder the data dir:\n%s",
		steady, end, (c1-c0)/steady.Seconds(), c1-c0, selfRSS()/1024, m0.machine(), dirRSS(dir))
	detail(b, "CPU used over the steady %s, by process (per machine: CPU-s per node over the window):\n%s", steady, cpuTable(procs0, procs1, end))
	for who, rc := range apiservers {
		detail(b, "requests %s answered over the steady %s, per second:\n%s", who, steady, mixTable(mix0[who], requestMix(rc), steady, 12))
	}
	b.ReportMetric((c1-c0)/steady.Seconds(), "steady-self-cores")
	b.ReportMetric(float64(selfRSS())/1024, "steady-self-rss-MiB")
	b.ReportMetric(0, "ns/op")
}

// fleetCount sums readyReplicas and replicas of every pool.
func fleetCount(c *client, names []string, poolsPer int) (ready, machines int) {
	for _, cl := range names {
		for p := range poolsPer {
			if np, code, err := c.pool(cl, fmt.Sprintf("pool-%d", p)); err == nil && code == http.StatusOK {
				ready += int(np.Status.ReadyReplicas)
				machines += int(np.Status.Replicas)
			}
		}
	}
	return ready, machines
}

func selfRSS() int64 {
	k, _ := rssKiB("self")
	return k
}

// dirRSS sums the RSS of the processes whose command line mentions dir, by executable, and
// in total.
func dirRSS(dir string) string {
	byExe := map[string]int64{}
	count := map[string]int{}
	var total int64
	eachDirProc(dir, func(pid, cmd string) {
		k, err := rssKiB(pid)
		if err != nil {
			return
		}
		exe, _, _ := strings.Cut(cmd, "\x00")
		exe = filepath.Base(exe)
		byExe[exe] += k
		count[exe]++
		total += k
	})
	var lines []string
	for exe, k := range byExe {
		lines = append(lines, fmt.Sprintf("  %-24s ×%-3d %6d MiB", exe, count[exe], k/1024))
	}
	slices.Sort(lines)
	lines = append(lines, fmt.Sprintf("  total %d MiB", total/1024))
	return strings.Join(lines, "\n")
}

// eachDirProc calls f with the pid and NUL-separated command line of every process, this
// one aside, whose command line mentions dir.
func eachDirProc(dir string, f func(pid, cmd string)) {
	ents, _ := os.ReadDir("/proc")
	self := fmt.Sprint(os.Getpid())
	for _, e := range ents {
		pid := e.Name()
		if pid == self || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil || !strings.Contains(string(cmd), dir) {
			continue
		}
		f(pid, string(cmd))
	}
}

// thisProcess names the benchmark's own process in dirCPU: the daemons, Cluster API's
// controllers, the local cloud and its simulated machines.
const thisProcess = "this process (daemons, Cluster API, local cloud)"

// dirCPU is the CPU time used so far by this process and by the processes under dir, by
// role: the executable's name, "management " before it for the management cluster's. A
// process that exits between two readings takes its time with it.
func dirCPU(dir string) map[string]float64 {
	out := map[string]float64{}
	out[thisProcess], _ = cpuSeconds("self")
	mgmt := filepath.Join(dir, "management") + "/"
	eachDirProc(dir, func(pid, cmd string) {
		s, err := cpuSeconds(pid)
		if err != nil {
			return
		}
		exe, _, _ := strings.Cut(cmd, "\x00")
		role := filepath.Base(exe)
		if strings.Contains(cmd, mgmt) {
			role = "management " + role
		}
		out[role] += s
	})
	return out
}

// cpuTable renders the CPU seconds each role used between two dirCPU readings, its share,
// and per machine.
func cpuTable(before, after map[string]float64, machines int) string {
	var total float64
	used := map[string]float64{}
	for role, s := range after {
		used[role] = s - before[role]
		total += used[role]
	}
	roles := slices.SortedFunc(maps.Keys(used), func(a, b string) int { return cmp.Compare(used[b], used[a]) })
	row := func(role string, s float64) string {
		return fmt.Sprintf("  %-50s %8.1f %5.0f%% %10.3f s", role, s, 100*s/max(total, 1e-9), s/float64(max(machines, 1)))
	}
	lines := []string{fmt.Sprintf("  %-50s %8s %6s %12s", "process", "CPU-s", "share", "per machine")}
	for _, r := range roles {
		lines = append(lines, row(r, used[r]))
	}
	return strings.Join(append(lines, row("total", total)), "\n")
}

// requestMix reads a kube-apiserver's request counters (testenv.APIRequestCounts), or none
// when they cannot be read.
func requestMix(rc rest.Interface) map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts, err := testenv.APIRequestCounts(ctx, rc)
	if err != nil {
		return map[string]float64{}
	}
	return counts
}

// mixTable renders the n most frequent requests between two requestMix readings d apart,
// per second, and all of them together.
func mixTable(before, after map[string]float64, d time.Duration, n int) string {
	rate := map[string]float64{}
	var total float64
	for k, v := range after {
		if r := (v - before[k]) / d.Seconds(); r > 0 {
			rate[k] = r
			total += r
		}
	}
	keys := slices.SortedFunc(maps.Keys(rate), func(a, b string) int { return cmp.Compare(rate[b], rate[a]) })
	var lines []string
	for _, k := range keys[:min(n, len(keys))] {
		lines = append(lines, fmt.Sprintf("  %-48s %7.2f", k, rate[k]))
	}
	return strings.Join(append(lines, fmt.Sprintf("  %-48s %7.2f", "all", total)), "\n")
}

// machines lists the cluster's machines.
func (c *client) machines(cluster string) ([]api.Machine, error) {
	var l api.MachineList
	code, body, err := c.do(http.MethodGet, "/v1/clusters/"+cluster+"/machines", "", &l)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("machines of %s: %d %s", cluster, code, body)
	}
	return l.Items, nil
}
