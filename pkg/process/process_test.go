package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary is also the child the tests supervise; these variables pick its role.
const (
	childEnv      = "HOSTPLANE_PROCESS_TEST_CHILD"      // addr: serve /healthz (200) and /exit there
	grandchildEnv = "HOSTPLANE_PROCESS_TEST_GRANDCHILD" // set: also run a grandchild in the group
	ignoreTermEnv = "HOSTPLANE_PROCESS_TEST_IGNORE_TERM"
	sleeperEnv    = "HOSTPLANE_PROCESS_TEST_SLEEPER" // set: sleep until killed (the grandchild)
)

// waitTimeout bounds every wait in these tests; generous, because the machine may be busy.
const waitTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) != "" {
		for {
			time.Sleep(time.Hour)
		}
	}
	if addr := os.Getenv(childEnv); addr != "" {
		runChild(addr) // never returns
	}
	m.Run()
}

// runChild is the supervised child: a tiny HTTP server on addr.
func runChild(addr string) {
	if os.Getenv(ignoreTermEnv) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	if os.Getenv(grandchildEnv) != "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		gc := exec.Command(exe)
		gc.Env = []string{sleeperEnv + "=1"}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "child: start grandchild:", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stdout, "child started grandchild %d\n", gc.Process.Pid)
		// The group's SIGTERM reaches the grandchild too; reap it before exiting, so no
		// zombie is left for an init that may not reap.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			_ = gc.Wait()
			os.Exit(0)
		}()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stdout, "child listening on %s\n", addr)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/exit", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	err = http.Serve(ln, mux)
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(2)
}

// harness gives a test a state dir and makes sure no process it saw outlives it.
type harness struct {
	t   *testing.T
	dir string

	mu   sync.Mutex
	seen map[int]uint64 // pid → start ticks of every process the test looked at
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), seen: make(map[int]uint64)}
	// Registered before any supervisor's cleanup, so it runs after them.
	t.Cleanup(h.killLeftovers)
	return h
}

// supervisor returns a new Supervisor on the harness's dir, stopped at the end of the test.
func (h *harness) supervisor() *Supervisor {
	h.t.Helper()
	s, err := NewSupervisor(h.dir, slog.New(slog.NewTextHandler(h.t.Output(),
		&slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		h.t.Fatalf("NewSupervisor: %v", err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := s.StopAll(ctx); err != nil && !errors.Is(err, ErrClosed) {
			h.t.Errorf("cleanup: StopAll: %v", err)
		}
		_ = s.Close()
	})
	return s
}

// pid records pid as seen by the test and returns it.
func (h *harness) pid(pid int) int {
	h.t.Helper()
	if pid <= 0 {
		h.t.Fatalf("no pid")
	}
	if st, err := readProcStat(pid); err == nil {
		h.mu.Lock()
		h.seen[pid] = st.startTicks
		h.mu.Unlock()
	}
	return pid
}

// killLeftovers kills, and reports, every process the test saw or left a pidfile for
// that still runs.
func (h *harness) killLeftovers() {
	h.mu.Lock()
	procs := make(map[int]uint64, len(h.seen))
	for pid, ticks := range h.seen {
		procs[pid] = ticks
	}
	h.mu.Unlock()
	pidfiles, _ := filepath.Glob(filepath.Join(h.dir, "*.pid"))
	for _, path := range pidfiles {
		if rec, err := readPidfile(path); err == nil {
			procs[rec.Pid] = rec.StartTicks
		}
	}
	for pid, ticks := range procs {
		st, err := readProcStat(pid)
		if err != nil || st.startTicks != ticks || st.dead() {
			continue
		}
		h.t.Errorf("pid %d still runs after the test; killing its group", pid)
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil) // ECHILD unless it is our child
	}
}

// childSpec is a spec that runs the test binary as an HTTP child on a free port.
func childSpec(t *testing.T, name string, env ...string) (Spec, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	return Spec{
		Name:           name,
		Path:           exe,
		Env:            append([]string{childEnv + "=" + addr}, env...),
		Probe:          HTTPProbe(nil, "http://"+addr+"/healthz", nil),
		StopTimeout:    10 * time.Second,
		InitialBackoff: 10 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
	}, addr
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func waitStatus(t *testing.T, p *Process, what string, cond func(Status) bool) Status {
	t.Helper()
	var st Status
	eventually(t, waitTimeout, what, func() bool {
		st = p.Status()
		return cond(st)
	})
	return st
}

func waitReady(t *testing.T, p *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v (status %+v)", err, p.Status())
	}
}

func start(t *testing.T, s *Supervisor, spec Spec) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p, err := s.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%s): %v", spec.Name, err)
	}
	return p
}

func processGone(pid int) bool { return errors.Is(unix.Kill(pid, 0), unix.ESRCH) }
func groupGone(pgid int) bool  { return errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) }

// reaped reports that pid no longer names the process that started at ticks, not even as a
// zombie.
func reaped(pid int, ticks uint64) bool {
	st, err := readProcStat(pid)
	return err != nil || st.startTicks != ticks
}

func startTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := readProcStat(pid)
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	return st.startTicks
}

// groupMembers lists the processes in group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.pgrp == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestSupervisor_Start_ProbesToReady(t *testing.T) {
	h := newHarness(t)
	s := h.supervisor()
	spec, addr := childSpec(t, "etcd")

	p := start(t, s, spec)
	waitReady(t, p)

	st := p.Status()
	pid := h.pid(st.Pid)
	if st.State != StateReady || st.Restarts != 0 || st.Adopted || st.Name != "etcd" || st.StartedAt.IsZero() {
		t.Errorf("status = %+v, want Ready, not adopted, no restarts", st)
	}
	if pgid, err := unix.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("pgid of %d = %d, %v; want its own group", pid, pgid, err)
	}
	rec, err := readPidfile(filepath.Join(h.dir, "etcd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pid != pid || rec.Hash != spec.Hash() || rec.StartTicks != startTicks(t, pid) {
		t.Errorf("pidfile = %+v, want pid %d, hash %s", rec, pid, spec.Hash())
	}
	log, err := os.ReadFile(filepath.Join(h.dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "child listening on "+addr) {
		t.Errorf("log file does not have the child's output:\n%s", log)
	}
	if got, ok := s.Get("etcd"); !ok || got != p {
		t.Errorf("Get(etcd) = %p, %v; want %p", got, ok, p)
	}
	if l := s.List(); len(l) != 1 || l[0].Pid != pid {
		t.Errorf("List() = %+v", l)
	}
	// Starting the same spec again returns the running process.
	if again := start(t, s, spec); again != p || again.Status().Pid != pid {
		t.Errorf("second Start returned %p (pid %d), want %p (pid %d)", again, again.Status().Pid, p, pid)
	}
}

func TestSupervisor_WhenKilled_RestartsWithNewPid(t *testing.T) {
	h := newHarness(t)
	s := h.supervisor()
	spec, _ := childSpec(t, "apiserver")
	p := start(t, s, spec)
	waitReady(t, p)
	pid := h.pid(p.Status().Pid)
	ticks := startTicks(t, pid)

	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, p, "a restart", func(s Status) bool { return s.Restarts == 1 && s.Pid != 0 })
	h.pid(st.Pid)
	if st.Pid == pid {
		t.Errorf("restarted with the same pid %d", pid)
	}
	if !reaped(pid, ticks) {
		t.Errorf("killed pid %d was not reaped", pid)
	}
	waitReady(t, p)
	st = p.Status()
	if st.State != StateReady || st.Restarts != 1 || st.Adopted || !strings.Contains(st.LastError, "killed") {
		t.Errorf("status = %+v, want Ready after 1 restart, LastError about the kill", st)
	}
	rec, err := readPidfile(filepath.Join(h.dir, "apiserver.pid"))
	if err != nil || rec.Pid != st.Pid {
		t.Errorf("pidfile = %+v, %v; want pid %d", rec, err, st.Pid)
	}
}

// Without pidfd_open (kernels before 5.3, strict seccomp profiles) exits are found by
// polling /proc.
func TestSupervisor_WithoutPidfd_RestartsAndStops(t *testing.T) {
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { pidfdOpen = unix.PidfdOpen })

	h := newHarness(t)
	s := h.supervisor()
	spec, _ := childSpec(t, "etcd")
	p := start(t, s, spec)
	waitReady(t, p)
	pid := h.pid(p.Status().Pid)
	ticks := startTicks(t, pid)

	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, p, "a restart", func(s Status) bool { return s.Restarts == 1 && s.Pid != 0 })
	h.pid(st.Pid)
	if !reaped(pid, ticks) {
		t.Errorf("killed pid %d was not reaped", pid)
	}
	waitReady(t, p)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !processGone(st.Pid) || !groupGone(st.Pid) {
		t.Errorf("pid %d still there after Stop", st.Pid)
	}
}

func TestSupervisor_AfterClose_NewSupervisorReadoptsRunningProcess(t *testing.T) {
	h := newHarness(t)
	spec, addr := childSpec(t, "etcd")
	spec.Probe = TCPProbe(addr)

	s1 := h.supervisor()
	p1 := start(t, s1, spec)
	waitReady(t, p1)
	pid := h.pid(p1.Status().Pid)

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if processGone(pid) {
		t.Fatalf("Close stopped pid %d", pid)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "etcd.pid")); err != nil {
		t.Fatalf("Close removed the pidfile: %v", err)
	}
	if _, err := s1.Start(context.Background(), spec); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if err := p1.Stop(context.Background()); !errors.Is(err, ErrClosed) || processGone(pid) {
		t.Errorf("Stop after Close: %v, want ErrClosed and the process left running", err)
	}

	s2 := h.supervisor()
	if got, ok := s2.LeftRunning("etcd"); !ok || got != pid {
		t.Errorf("LeftRunning = %d %v, want pid %d", got, ok, pid)
	}
	p2 := start(t, s2, spec)
	if st := p2.Status(); !st.Adopted || st.Pid != pid || st.Restarts != 0 {
		t.Fatalf("status = %+v, want adopted pid %d", st, pid)
	}
	waitReady(t, p2)

	// The adopted process is watched: killed, it is restarted.
	ticks := startTicks(t, pid)
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, p2, "a restart", func(s Status) bool { return s.Restarts == 1 && s.Pid != 0 })
	h.pid(st.Pid)
	if st.Pid == pid || st.Adopted {
		t.Errorf("status = %+v, want a new, not adopted, pid", st)
	}
	if !reaped(pid, ticks) {
		t.Errorf("killed pid %d was not reaped", pid)
	}
	waitReady(t, p2)
}

func TestSupervisor_WhenSpecChanges_ReplacesProcess(t *testing.T) {
	t.Run("same supervisor", func(t *testing.T) {
		h := newHarness(t)
		s := h.supervisor()
		a, _ := childSpec(t, "etcd")
		pa := start(t, s, a)
		waitReady(t, pa)
		pidA := h.pid(pa.Status().Pid)

		b, _ := childSpec(t, "etcd") // another port: another command line
		pb := start(t, s, b)
		if pb == pa {
			t.Fatal("Start with a changed spec returned the old process")
		}
		if !processGone(pidA) || pa.Status().State != StateStopped {
			t.Errorf("old pid %d still there (status %+v)", pidA, pa.Status())
		}
		waitReady(t, pb)
		if st := pb.Status(); st.Pid == pidA || st.Adopted {
			t.Errorf("status = %+v, want a fresh process", st)
		}
		h.pid(pb.Status().Pid)
		if got, _ := s.Get("etcd"); got != pb {
			t.Errorf("Get(etcd) = %p, want the new process %p", got, pb)
		}
	})

	t.Run("new supervisor", func(t *testing.T) {
		h := newHarness(t)
		a, _ := childSpec(t, "etcd")
		s1 := h.supervisor()
		pa := start(t, s1, a)
		waitReady(t, pa)
		pidA := h.pid(pa.Status().Pid)
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}

		b, _ := childSpec(t, "etcd")
		s2 := h.supervisor()
		pb := start(t, s2, b)
		st := pb.Status()
		h.pid(st.Pid)
		if st.Adopted || st.Pid == pidA {
			t.Errorf("status = %+v, want a fresh process, not pid %d", st, pidA)
		}
		if !processGone(pidA) {
			t.Errorf("old pid %d still runs", pidA)
		}
		rec, err := readPidfile(filepath.Join(h.dir, "etcd.pid"))
		if err != nil || rec.Hash != b.Hash() || rec.Pid != st.Pid {
			t.Errorf("pidfile = %+v, %v; want the new spec's pid and hash", rec, err)
		}
		waitReady(t, pb)
	})
}

func TestSupervisor_StopAll_KillsProcessGroupsAndRemovesPidfiles(t *testing.T) {
	baseline := runtime.NumGoroutine()
	h := newHarness(t)
	s := h.supervisor()

	// One child runs a grandchild in its group; the other ignores SIGTERM.
	withGrandchild, _ := childSpec(t, "with-grandchild", grandchildEnv+"=1")
	stubborn, _ := childSpec(t, "stubborn", ignoreTermEnv+"=1")
	stubborn.StopTimeout = 200 * time.Millisecond
	procs := []*Process{start(t, s, withGrandchild), start(t, s, stubborn)}
	var pids []int
	for _, p := range procs {
		waitReady(t, p)
		pids = append(pids, h.pid(p.Status().Pid))
	}
	eventually(t, waitTimeout, "the grandchild", func() bool { return len(groupMembers(pids[0])) == 2 })
	for _, pid := range groupMembers(pids[0]) {
		h.pid(pid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.StopAll(ctx); err != nil {
		t.Fatalf("StopAll: %v", err)
	}

	for i, p := range procs {
		name := p.Status().Name
		if !processGone(pids[i]) || !groupGone(pids[i]) {
			t.Errorf("%s: pid %d or its group is still there: %v", name, pids[i], groupMembers(pids[i]))
		}
		if _, err := os.Stat(filepath.Join(h.dir, name+".pid")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: pidfile still there: %v", name, err)
		}
		if st := p.Status(); st.State != StateStopped || st.Pid != 0 {
			t.Errorf("%s: status = %+v, want Stopped", name, st)
		}
		if _, ok := s.Get(name); ok {
			t.Errorf("%s: Get finds a stopped process", name)
		}
		if err := p.Stop(ctx); err != nil {
			t.Errorf("%s: second Stop: %v", name, err)
		}
		if err := p.WaitReady(ctx); !errors.Is(err, ErrStopped) {
			t.Errorf("%s: WaitReady after Stop: %v, want ErrStopped", name, err)
		}
	}
	if l := s.List(); len(l) != 0 {
		t.Errorf("List() after StopAll = %+v", l)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	defaultProbeClient.CloseIdleConnections()
	eventually(t, waitTimeout, "the supervisor's goroutines to end", func() bool {
		return runtime.NumGoroutine() <= baseline
	})
}

func TestSupervisor_Start_MissingBinary_ReturnsError(t *testing.T) {
	h := newHarness(t)
	s := h.supervisor()
	_, err := s.Start(context.Background(), Spec{Name: "missing", Path: filepath.Join(h.dir, "no-such-binary")})
	if !errors.Is(err, ErrStart) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Start: %v, want ErrStart and fs.ErrNotExist", err)
	}
	if _, ok := s.Get("missing"); ok {
		t.Error("Get finds a process that did not start")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "missing.pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pidfile: %v, want none", err)
	}
}

func TestSupervisor_Start_RejectsInvalidSpec(t *testing.T) {
	s := newHarness(t).supervisor()
	for _, spec := range []Spec{
		{Path: "/bin/true"},
		{Name: "../etcd", Path: "/bin/true"},
		{Name: "..", Path: "/bin/true"},
		{Name: "etcd"},
		{Name: "etcd", Path: "/bin/true", StopTimeout: -1},
	} {
		if _, err := s.Start(context.Background(), spec); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Start(%+v): %v, want ErrInvalidSpec", spec, err)
		}
	}
}

func TestSupervisor_LeftRunning_OnlyForTheProcessThePidfileRecorded(t *testing.T) {
	// No harness: its cleanup would kill what the pidfile names, here our parent.
	dir := t.TempDir()
	s, err := NewSupervisor(dir, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "etcd.pid")
	t.Cleanup(func() { _ = os.Remove(pidfile); _ = s.Close() })
	if _, ok := s.LeftRunning("etcd"); ok {
		t.Error("LeftRunning without a pidfile")
	}
	// A live process (our parent) that started at another time than the pidfile says: the
	// pid was reused.
	ppid := os.Getppid()
	rec := fmt.Sprintf(`{"pid":%d,"start_ticks":%d,"hash":"x"}`, ppid, startTicks(t, ppid)+1)
	if err := os.WriteFile(pidfile, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid, ok := s.LeftRunning("etcd"); ok {
		t.Errorf("LeftRunning = %d for a reused pid", pid)
	}
	rec = fmt.Sprintf(`{"pid":%d,"start_ticks":%d,"hash":"x"}`, ppid, startTicks(t, ppid))
	if err := os.WriteFile(pidfile, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid, ok := s.LeftRunning("etcd"); !ok || pid != ppid {
		t.Errorf("LeftRunning = %d %v, want %d", pid, ok, ppid)
	}
}

func TestSupervisor_Start_IgnoresStalePidfile(t *testing.T) {
	me := startTicks(t, os.Getpid())
	for _, tc := range []struct {
		name    string
		pidfile func(Spec) string
	}{
		// Our own pid with another start time: a recycled pid, which must be neither
		// adopted nor killed.
		{"recycled pid", func(spec Spec) string {
			return fmt.Sprintf(`{"pid":%d,"start_ticks":%d,"hash":%q}`, os.Getpid(), me+1, spec.Hash())
		}},
		{"garbage", func(Spec) string { return "not a pidfile" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			spec, _ := childSpec(t, "etcd")
			if err := os.WriteFile(filepath.Join(h.dir, "etcd.pid"), []byte(tc.pidfile(spec)), 0o600); err != nil {
				t.Fatal(err)
			}
			p := start(t, h.supervisor(), spec)
			st := p.Status()
			h.pid(st.Pid)
			if st.Adopted || st.Pid == os.Getpid() {
				t.Errorf("status = %+v, want a fresh process", st)
			}
			waitReady(t, p)
		})
	}
}

func TestProcess_WaitReady_HonoursContext(t *testing.T) {
	h := newHarness(t)
	s := h.supervisor()
	spec, _ := childSpec(t, "never-ready")
	spec.Probe = func(context.Context) error { return errors.New("never ready") }
	p := start(t, s, spec)
	h.pid(p.Status().Pid)
	waitStatus(t, p, "a failed probe", func(s Status) bool { return strings.Contains(s.LastError, "never ready") })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := p.WaitReady(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never ready") {
		t.Fatalf("WaitReady: %v, want DeadlineExceeded naming the probe's error", err)
	}
	if st := p.Status(); st.State != StateStarting {
		t.Errorf("status = %+v, want Starting", st)
	}
}

func TestSpec_Hash(t *testing.T) {
	base := Spec{Name: "etcd", Path: "/bin/etcd", Args: []string{"--a", "b"}, Env: []string{"X=1"}, Dir: "/d"}
	with := func(f func(*Spec)) Spec {
		s := base
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		spec Spec
		same bool
	}{
		{"name, log, probe and timeouts do not count", with(func(s *Spec) {
			s.Name, s.LogFile, s.StopTimeout, s.InitialBackoff = "other", "/x.log", time.Second, time.Second
			s.Probe = TCPProbe("127.0.0.1:1")
		}), true},
		{"path", with(func(s *Spec) { s.Path = "/bin/etcd2" }), false},
		{"args", with(func(s *Spec) { s.Args = []string{"--a"} }), false},
		{"args joined", with(func(s *Spec) { s.Args = []string{"--a b"} }), false},
		{"args moved to env", with(func(s *Spec) { s.Args, s.Env = []string{"--a", "b", "X=1"}, nil }), false},
		{"env", with(func(s *Spec) { s.Env = []string{"X=2"} }), false},
		{"dir", with(func(s *Spec) { s.Dir = "/e" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.Hash() == base.Hash(); got != tc.same {
				t.Errorf("same hash = %v, want %v", got, tc.same)
			}
		})
	}
	if a, b := (Spec{Path: "p"}).Hash(), (Spec{Path: "p", Args: []string{}, Env: []string{}}).Hash(); a != b {
		t.Errorf("nil and empty lists hash differently: %s, %s", a, b)
	}
	if h := base.Hash(); h != base.Hash() || len(h) < 16 {
		t.Errorf("Hash() = %q, want a stable hex string", h)
	}
}

func TestParseProcStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses.
	line := "4242 (a (b) c) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.pgrp != 4240 || st.startTicks != 987654 {
		t.Errorf("parseProcStat = %+v", st)
	}
	if _, err := parseProcStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short line parsed")
	}
}

func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/readyz" {
			http.Error(w, "[-]etcd failed", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	header := http.Header{"Authorization": {"Bearer t"}}
	ctx := context.Background()

	if err := HTTPProbe(srv.Client(), srv.URL+"/livez", header)(ctx); err != nil {
		t.Errorf("healthy: %v", err)
	}
	err := HTTPProbe(srv.Client(), srv.URL+"/readyz", header)(ctx)
	if !errors.Is(err, ErrProbeFailed) || !strings.Contains(err.Error(), "[-]etcd failed") {
		t.Errorf("unready: %v, want ErrProbeFailed with the body", err)
	}
	if err := HTTPProbe(srv.Client(), srv.URL+"/livez", nil)(ctx); !errors.Is(err, ErrProbeFailed) {
		t.Errorf("no header: %v, want ErrProbeFailed", err)
	}
	if err := TCPProbe(srv.Listener.Addr().String())(ctx); err != nil {
		t.Errorf("TCPProbe: %v", err)
	}
}

func TestSupervisor_Terminate_StopsProcessLeftByEarlierSupervisor(t *testing.T) {
	h := newHarness(t)
	spec, addr := childSpec(t, "orphan")
	spec.Probe = TCPProbe(addr)

	s1 := h.supervisor()
	p1 := start(t, s1, spec)
	waitReady(t, p1)
	pid := h.pid(p1.Status().Pid)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := h.supervisor()
	if err := s2.Terminate(context.Background(), "unknown"); err != nil {
		t.Errorf("Terminate of an unknown name: %v, want nil", err)
	}
	if err := s2.Terminate(context.Background(), spec.Name); err != nil {
		t.Fatalf("Terminate: %v", err)
	}
	if !processGone(pid) {
		t.Errorf("pid %d still runs after Terminate", pid)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "orphan.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile left after Terminate: %v", err)
	}

	// A supervised process is stopped like Process.Stop.
	p2 := start(t, s2, spec)
	waitReady(t, p2)
	pid2 := h.pid(p2.Status().Pid)
	if err := s2.Terminate(context.Background(), spec.Name); err != nil {
		t.Fatalf("Terminate supervised: %v", err)
	}
	if !processGone(pid2) {
		t.Errorf("pid %d still runs after Terminate", pid2)
	}
	if _, ok := s2.Get(spec.Name); ok {
		t.Errorf("process still supervised after Terminate")
	}
}
