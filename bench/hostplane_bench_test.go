package bench

// Helpers of the control-plane benchmarks: a `hostplane dev` stack on random ports, a small
// client of its HTTP API, a recorder of the event timeline, statistics and RSS.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	hpclient "github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// benchRelease is the release every benchmark cluster runs.
const benchRelease = "1.34.4"

// Environment knobs.
const (
	envRuns       = "HOSTPLANE_BENCH_RUNS"       // creates, or wakes, and as many floor runs; default 10
	envMany       = "HOSTPLANE_BENCH_MANY"       // "1": the RSS benchmark also goes to 30 clusters
	envConcurrent = "HOSTPLANE_BENCH_CONCURRENT" // clusters created at once; default 20
	envLogDir     = "HOSTPLANE_BENCH_LOGDIR"     // keep the dev stack's info log here, one file per benchmark
	// The tuning benchmark: its variants (release.ParseSelection syntax, separated by ";";
	// default "none;all"), clusters per variant (default 2), seconds the clusters settle after
	// Available (default 20) and seconds of idle measured (default 30).
	envTuning         = "HOSTPLANE_BENCH_TUNING"
	envTuningClusters = "HOSTPLANE_BENCH_TUNING_CLUSTERS"
	envSettle         = "HOSTPLANE_BENCH_SETTLE"
	envIdle           = "HOSTPLANE_BENCH_IDLE"
)

// Timeouts: generous, since 20 control planes starting at once on 2 cores take minutes.
const (
	availableTimeout = 10 * time.Minute
	deleteTimeout    = 5 * time.Minute
	pollInterval     = 100 * time.Millisecond
)

func benchReleaseOf(b *testing.B) release.Release {
	rel, err := release.Lookup(benchRelease)
	if err != nil {
		b.Fatal(err)
	}
	testenv.RequireBinaries(b, rel, release.Components()...)
	return rel
}

// startStack starts `hostplane dev` (no management apiserver) on a temp data dir and waits
// until it is healthy; the stack and every cluster process stop when the benchmark ends.
// With a timeline, the stack's log feeds it the processes' start and ready times, and its
// NATS feeds it every event.
func startStack(b *testing.B, tl *timeline) (*dev.Stack, *client) {
	b.Helper()
	return startStackWith(b, tl, dev.Config{})
}

// startStackWith is startStack with cfg's optional fields (ComponentTuning).
func startStackWith(b *testing.B, tl *timeline, cfg dev.Config) (*dev.Stack, *client) {
	b.Helper()
	benchReleaseOf(b)
	dir := b.TempDir()
	log := stackLogger(b)
	if tl != nil {
		log = slog.New(&tapHandler{Handler: log.Handler(), tl: tl})
	}
	cfg.DataDir, cfg.Addr, cfg.NATSPort, cfg.NoManagementAPIServer, cfg.Logger = dir, "127.0.0.1:0", -1, true, log
	s, err := dev.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Stop(context.Background()) })
	if tl != nil {
		tl.subscribe(b, s)
	}
	c := newClient(b, s)
	testenv.Eventually(b, time.Minute, func() bool {
		code, _, err := c.do(http.MethodGet, "/healthz", "", nil)
		return err == nil && code == http.StatusOK
	}, "hostplane dev never became healthy")
	return s, c
}

// stackLogger writes the stack's info log to $HOSTPLANE_BENCH_LOGDIR/<benchmark>.log when
// that is set, else only warnings and errors into the benchmark's output.
func stackLogger(b *testing.B) *slog.Logger {
	dir := os.Getenv(envLogDir)
	if dir == "" {
		return slog.New(slog.NewTextHandler(quietAfterCleanup(b), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	name := strings.NewReplacer("/", "_", "=", "-").Replace(b.Name())
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() }) // registered first, so it runs after the stack's Stop
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// tapHandler passes records on to Handler (at its level) and tells the timeline when the
// process supervisor logs that a process "started" or is "ready" (attribute "process").
type tapHandler struct {
	slog.Handler
	tl    *timeline
	attrs []slog.Attr
}

func (h *tapHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *tapHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "started" || r.Message == "ready" {
		proc := ""
		for _, a := range h.attrs {
			if a.Key == "process" {
				proc = a.Value.String()
			}
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "process" {
				proc = a.Value.String()
			}
			return true
		})
		if proc != "" {
			h.tl.process(proc, r.Message, r.Time)
		}
	}
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *tapHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &tapHandler{Handler: h.Handler.WithAttrs(as), tl: h.tl, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h *tapHandler) WithGroup(name string) slog.Handler {
	return &tapHandler{Handler: h.Handler.WithGroup(name), tl: h.tl, attrs: h.attrs}
}

// detail prints a multi-line report into the benchmark's stdout (b.Log output of a
// benchmark is cut to 10 lines).
func detail(b *testing.B, format string, args ...any) {
	fmt.Printf("--- %s: %s\n", b.Name(), strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", "\n    "))
}

// quietAfterCleanup is the benchmark's output until its cleanups have run, then a sink, so a
// late log line from a stopping daemon does not write into a finished benchmark.
func quietAfterCleanup(b *testing.B) io.Writer {
	w := &lockedWriter{out: b.Output()}
	b.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.out = io.Discard
	})
	return w
}

type lockedWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

// client speaks to the front door with the admin token through the public API client. It
// returns errors rather than failing the benchmark, so goroutines can use it.
type client struct {
	api *hpclient.Client
}

func newClient(b *testing.B, s *dev.Stack) *client {
	b.Helper()
	ac, err := hpclient.New(hpclient.Options{Server: s.URL(), Token: s.AdminToken(), UserAgent: "hostplane-bench"})
	if err != nil {
		b.Fatal(err)
	}
	return &client{api: ac}
}

// do sends a request (body "" sends none) and decodes a 2xx answer into out when non-nil.
func (c *client) do(method, path, body string, out any) (int, []byte, error) {
	var in []byte
	if body != "" {
		in = []byte(body)
	}
	code, buf, err := c.api.Raw(context.Background(), method, path, in)
	if err != nil {
		return 0, nil, err
	}
	if out != nil && code < 300 {
		if err := json.Unmarshal(buf, out); err != nil {
			return code, buf, fmt.Errorf("%s %s: decode %s: %w", method, path, buf, err)
		}
	}
	return code, buf, nil
}

// create asks for a SingleReplica cluster of benchRelease on the local platform.
func (c *client) create(name string) error {
	body := `{"name":"` + name + `","spec":{"release":{"version":"` + benchRelease +
		`"},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`
	code, resp, err := c.do(http.MethodPost, "/v1/clusters", body, nil)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("create %s: %d %s", name, code, resp)
	}
	return nil
}

func (c *client) delete(name string) error {
	code, resp, err := c.do(http.MethodDelete, "/v1/clusters/"+name, "", nil)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted && code != http.StatusNotFound {
		return fmt.Errorf("delete %s: %d %s", name, code, resp)
	}
	return nil
}

// list returns every cluster.
func (c *client) list() ([]api.Cluster, error) {
	l, err := c.api.ListClusters(context.Background())
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitAvailable polls until the cluster's Available condition is True and returns when it
// was first seen so.
func (c *client) waitAvailable(name string, timeout time.Duration) (time.Time, error) {
	return c.waitCondition(name, api.ConditionAvailable, timeout)
}

// waitCondition polls until the cluster's condition of that type is True and returns when it
// was first seen so.
func (c *client) waitCondition(name, condition string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last api.Cluster
	for time.Now().Before(deadline) {
		var cl api.Cluster
		code, _, err := c.do(http.MethodGet, "/v1/clusters/"+name, "", &cl)
		if err == nil && code == http.StatusOK {
			if cl.Status.Conditions.IsTrue(condition) {
				return time.Now(), nil
			}
			last = cl
		}
		time.Sleep(pollInterval)
	}
	st, _ := json.Marshal(last.Status.Conditions)
	return time.Time{}, fmt.Errorf("cluster %s not %s after %s; conditions: %s", name, condition, timeout, st)
}

// waitAllAvailable polls the list until every named cluster is Available, and returns when
// each was first seen so.
func (c *client) waitAllAvailable(names []string, interval, timeout time.Duration) (map[string]time.Time, error) {
	seen := make(map[string]time.Time, len(names))
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		items, err := c.list()
		now := time.Now()
		if err == nil {
			for _, cl := range items {
				if _, ok := seen[cl.Name]; !ok && slices.Contains(names, cl.Name) && cl.Status.Conditions.IsTrue(api.ConditionAvailable) {
					seen[cl.Name] = now
				}
			}
			if len(seen) == len(names) {
				return seen, nil
			}
		}
		time.Sleep(interval)
	}
	var missing []string
	for _, n := range names {
		if _, ok := seen[n]; !ok {
			missing = append(missing, n)
		}
	}
	return seen, fmt.Errorf("%d of %d clusters not Available after %s: %v", len(missing), len(names), timeout, missing)
}

// waitGone polls until GET answers 404.
func (c *client) waitGone(name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		code, _, err := c.do(http.MethodGet, "/v1/clusters/"+name, "", nil)
		if err == nil && code == http.StatusNotFound {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("cluster %s still there after %s", name, timeout)
}

// deleteAll deletes the clusters and waits until every one answers 404.
func (c *client) deleteAll(names []string) error {
	var errs []error
	for _, n := range names {
		errs = append(errs, c.delete(n))
	}
	for _, n := range names {
		errs = append(errs, c.waitGone(n, deleteTimeout))
	}
	return errors.Join(errs...)
}

// components returns the cluster's control-plane components.
func (c *client) components(name string) ([]api.ControlPlaneComponent, error) {
	l, err := c.api.Components(context.Background(), name)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// timeline records, per cluster, when each kind of event was first published (the event's
// own time, stamped by the publishing daemon) and, per process, when the supervisor first
// logged it "started" and "ready".
type timeline struct {
	mu    sync.Mutex
	first map[string]map[string]time.Time // cluster → "resource.verb[/component]" → time
	procs map[string]map[string]time.Time // process → "started"|"ready" → time
	nc    *nats.Conn
}

func newTimeline() *timeline {
	return &timeline{first: map[string]map[string]time.Time{}, procs: map[string]map[string]time.Time{}}
}

func (tl *timeline) process(name, what string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	m := tl.procs[name]
	if m == nil {
		m = map[string]time.Time{}
		tl.procs[name] = m
	}
	if _, ok := m[what]; !ok {
		m[what] = at
	}
}

// subscribe records every event on the stack's NATS until the benchmark ends.
func (tl *timeline) subscribe(b *testing.B, s *dev.Stack) {
	b.Helper()
	nc, err := s.ConnectNATS(b.Context(), natsauth.Admin)
	if err != nil {
		b.Fatal(err)
	}
	tl.nc = nc
	b.Cleanup(func() { nc.Close() })
	_, err = nc.Subscribe(events.EventPrefix+".>", func(m *nats.Msg) {
		subj, err := events.ParseSubject(m.Subject)
		if err != nil {
			return
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			return
		}
		kind := string(subj.Resource) + "." + subj.Verb
		if subj.Resource == events.ResourceComponent {
			_, comp, _ := strings.Cut(ev.Subject, "/")
			kind += "/" + comp
		}
		tl.mu.Lock()
		defer tl.mu.Unlock()
		m2 := tl.first[subj.Cluster]
		if m2 == nil {
			m2 = map[string]time.Time{}
			tl.first[subj.Cluster] = m2
		}
		if _, ok := m2[kind]; !ok {
			m2[kind] = ev.Time
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
}

// of returns the cluster's milestones: first-event times, and "started"/"ready" of each of
// its first replicas as "process.<what>/<component>".
func (tl *timeline) of(cluster string) map[string]time.Time {
	if tl.nc != nil {
		_ = tl.nc.Flush()
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range tl.first[cluster] {
		out[k] = v
	}
	for _, comp := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
		for what, at := range tl.procs[cluster+"-"+comp+"-0"] {
			out["process."+what+"/"+comp] = at
		}
	}
	return out
}

// Milestones of a create, in order, as kinds of the timeline.
var milestones = []struct{ kind, label string }{
	{"cluster.created", "cluster.created"},
	{"infra.ready", "infra.ready"},
	{"pki.ready", "pki.ready"},
	{"process.started/" + api.ComponentEtcd, "etcd process started"},
	{"process.ready/" + api.ComponentEtcd, "etcd probe passed"},
	{"component.available/" + api.ComponentEtcd, "etcd Available"},
	{"process.started/" + api.ComponentKubeAPIServer, "kube-apiserver process started"},
	{"process.ready/" + api.ComponentKubeAPIServer, "kube-apiserver probe passed"},
	{"component.available/" + api.ComponentKubeAPIServer, "kube-apiserver Available"},
	{"process.started/" + api.ComponentControllerManager, "kcm + scheduler processes started"},
	{"process.ready/" + api.ComponentControllerManager, "kcm probe passed"},
	{"process.ready/" + api.ComponentScheduler, "scheduler probe passed"},
	{"component.available/" + api.ComponentControllerManager, "kcm Available"},
	{"component.available/" + api.ComponentScheduler, "scheduler Available"},
}

// phases turns one cluster's timeline into the time of each milestone since post (the POST
// request), and the client's first sight of Available as the last entry.
func phases(events map[string]time.Time, post, available time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(milestones)+1)
	for _, m := range milestones {
		t, ok := events[m.kind]
		if !ok {
			out = append(out, -1)
			continue
		}
		out = append(out, t.Sub(post))
	}
	return append(out, available.Sub(post))
}

// phaseTable renders the median time of every milestone since the POST, over runs.
func phaseTable(runs [][]time.Duration) string {
	var buf bytes.Buffer
	labels := make([]string, 0, len(milestones)+1)
	for _, m := range milestones {
		labels = append(labels, m.label)
	}
	labels = append(labels, "Available=True seen by the client")
	fmt.Fprintf(&buf, "%-36s %10s %10s %10s", "milestone (since POST)", "median", "min", "max")
	for i, l := range labels {
		var ds []time.Duration
		for _, r := range runs {
			if i < len(r) && r[i] >= 0 {
				ds = append(ds, r[i])
			}
		}
		if len(ds) == 0 {
			fmt.Fprintf(&buf, "\n%-36s %10s", l, "(no event)")
			continue
		}
		slices.Sort(ds)
		fmt.Fprintf(&buf, "\n%-36s %10s %10s %10s", l, quantile(ds, 0.5).Round(time.Millisecond),
			ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	return buf.String()
}

// quantile is the nearest-rank quantile of sorted durations (q = 0.5: the median; with 10
// samples, q = 0.9 is the 9th).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func sortedCopy(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// rssKiB is VmRSS of a process in KiB (0 when it is gone).
func rssKiB(pid string) (int64, error) { return statusKiB(pid, "VmRSS") }

// statusKiB is a field of /proc/<pid>/status in KiB (VmRSS, RssAnon: the part of VmRSS that
// is not mapped from files, i.e. heap and stacks rather than the executable's pages).
func statusKiB(pid, field string) (int64, error) { return testenv.ProcKiB(pid, "status", field) }

// pssKiB is a process's proportional set size in KiB (/proc/<pid>/smaps_rollup): its private
// pages plus each shared page divided by the number of processes mapping it. The executable's
// pages, resident once for every cluster of a release, count once in the sum over processes,
// so the sum is what the processes cost together.
func pssKiB(pid string) (int64, error) { return testenv.ProcKiB(pid, "smaps_rollup", "Pss") }

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuSample is the machine's CPU time from /proc/stat's first line, in clock ticks.
type cpuSample struct{ busy, total uint64 }

func readCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var s cpuSample
	for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseUint(v, 10, 64)
		s.total += n
		if i != 3 && i != 4 {
			s.busy += n
		}
	}
	return s
}

// machine describes the machine's load since s: the share of all cores busy (anyone's
// work, this benchmark's included) and the load average now.
func (s cpuSample) machine() string {
	now := readCPU()
	busy := "?"
	if dt := now.total - s.total; dt > 0 {
		busy = fmt.Sprintf("%.0f%%", 100*float64(now.busy-s.busy)/float64(dt))
	}
	return "machine CPU busy " + busy + ", load " + loadAverage()
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on Linux/amd64).
const clockTicks = 100

// cpuSeconds is the CPU time (user + system) a process has used, from /proc/<pid>/stat.
func cpuSeconds(pid string) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it follow its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat of %s", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat of %s", pid)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64) // field 14: utime
	st, err2 := strconv.ParseUint(f[12], 10, 64) // field 15: stime
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}
