package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// pollInterval is how often a process is checked for exit when pidfd_open is not
	// available (kernels before 5.3, or a seccomp profile that forbids it).
	pollInterval = 250 * time.Millisecond
	// groupPollInterval is how often Stop checks whether a process group is empty.
	groupPollInterval = 20 * time.Millisecond
	// killGrace is how long Stop waits for a process group to vanish after SIGKILL.
	killGrace = 5 * time.Second
	// defaultPath is the child's PATH when the supervisor has none.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// instance is one run of a process: either a child this supervisor started, or a process it
// found running and adopted. It is the leader of its own process group (pgid == pid).
//
// A watcher goroutine, owned by the instance and ended by release, closes exited once the
// process has exited, reaping it first when it is a child of this OS process.
type instance struct {
	pid        int
	startTicks uint64
	startedAt  time.Time
	adopted    bool

	pidfd *os.File // nil when pidfd_open is unavailable: then /proc is polled

	exited chan struct{}
	reason string // how the process exited ("exit status 1", "signal: killed"); set before exited is closed

	done    chan struct{} // closed when the watcher goroutine has ended
	release func()        // ends the watcher and closes the pidfd; idempotent
}

// pidfdOpen is unix.PidfdOpen; tests replace it to exercise the /proc fallback.
var pidfdOpen = unix.PidfdOpen

// errGone reports that a pid no longer names the process we expected.
var errGone = errors.New("process is gone")

// watchPid opens a pidfd for pid, checks that pid still names the process that started at
// startTicks, and starts the watcher goroutine.
func watchPid(pid int, startTicks uint64, startedAt time.Time, adopted bool) (*instance, error) {
	in := &instance{
		pid:        pid,
		startTicks: startTicks,
		startedAt:  startedAt,
		adopted:    adopted,
		exited:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	fd, err := pidfdOpen(pid, 0)
	switch {
	case err == nil:
		if err := unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
			break
		}
		// Non-blocking, so os registers it with the runtime's poller: waiting for the
		// process's exit then parks a goroutine instead of blocking a thread.
		in.pidfd = os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	case errors.Is(err, unix.ESRCH):
		return nil, errGone
	}
	// Checked after opening the pidfd: if pid still names the process that started at
	// startTicks now, the pidfd names it too.
	if st, err := readProcStat(pid); err != nil || st.startTicks != startTicks {
		if in.pidfd != nil {
			_ = in.pidfd.Close()
		}
		return nil, errGone
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.release = sync.OnceFunc(func() {
		cancel()
		<-in.done
		if in.pidfd != nil {
			_ = in.pidfd.Close()
		}
	})
	go in.watch(ctx)
	return in, nil
}

func (in *instance) watch(ctx context.Context) {
	defer close(in.done)
	if in.pidfd != nil {
		switch err := waitPidfd(ctx, in.pidfd); {
		case err == nil:
			in.markExited()
			return
		case ctx.Err() != nil:
			return
		}
		// The pidfd could not be polled: fall back to /proc.
	}
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
		return in.gone(), nil
	})
	if err == nil {
		in.markExited()
	}
}

// waitPidfd waits until the pidfd is readable, which it becomes once the process has exited.
func waitPidfd(ctx context.Context, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				pollErr = err
				return true
			}
			return n > 0
		}
	})
	if err == nil {
		err = pollErr
	}
	return err
}

// gone is the /proc fallback of waitPidfd.
func (in *instance) gone() bool {
	if reaped, _ := in.tryReap(); reaped {
		return true
	}
	st, err := readProcStat(in.pid)
	return err != nil || st.startTicks != in.startTicks || st.dead()
}

func (in *instance) markExited() {
	if in.reason == "" {
		in.reap()
	}
	close(in.exited)
}

// tryReap reaps the process if it is an exited child of this OS process, recording how it
// exited. An adopted process is usually not our child (notChild): its parent reaps it.
// Until we reap it, a child's pid cannot be recycled, so wait4(pid) cannot reap another.
func (in *instance) tryReap() (reaped, notChild bool) {
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(in.pid, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, true
		case wpid != in.pid:
			return false, false
		}
		in.reason = describe(ws)
		return true, false
	}
}

// reap is called once the process is known to have exited.
func (in *instance) reap() {
	// A child is waitable by the time its pidfd is readable; the retries (100, 10ms apart)
	// only guard against a kernel that signals the pidfd a little earlier.
	reaped := false
	_ = wait.ExponentialBackoff(wait.Backoff{Duration: 10 * time.Millisecond, Steps: 100}, func() (bool, error) {
		var notChild bool
		reaped, notChild = in.tryReap()
		return reaped || notChild, nil
	})
	if !reaped {
		in.reason = "exited (not our child: status unknown)"
	}
}

func describe(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

func (in *instance) hasExited() bool {
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

// signal signals the process group, or the process alone when it has left its group.
func (in *instance) signal(sig unix.Signal) error {
	err := unix.Kill(-in.pid, sig)
	if errors.Is(err, unix.ESRCH) && !in.hasExited() {
		// Until it is reaped, an exited-but-unwatched pid is still ours: no recycling.
		err = unix.Kill(in.pid, sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// groupAlive reports whether any live process is left in the group the instance led. A
// group id is not recycled while the group has members, so this cannot see another
// process's group.
func (in *instance) groupAlive() bool {
	if err := unix.Kill(-in.pid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	return liveGroupMember(in.pid)
}

// waitGone waits up to d for the process to exit and its group to empty.
func (in *instance) waitGone(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case <-in.exited:
	case <-ctx.Done():
		return false
	}
	err := wait.PollUntilContextCancel(ctx, groupPollInterval, true, func(context.Context) (bool, error) {
		return !in.groupAlive(), nil
	})
	return err == nil
}

// terminate sends SIGTERM to the process group, waits up to grace for the process and its
// group to go, then sends SIGKILL.
func (in *instance) terminate(grace time.Duration, log *slog.Logger) error {
	if err := in.signal(unix.SIGTERM); err != nil {
		log.Warn("cannot send SIGTERM", "pid", in.pid, "err", err)
	}
	if in.waitGone(grace) {
		return nil
	}
	log.Warn("process did not stop after SIGTERM; sending SIGKILL", "pid", in.pid, "grace", grace)
	return in.kill()
}

func (in *instance) kill() error {
	if err := in.signal(unix.SIGKILL); err != nil {
		return fmt.Errorf("kill process group %d: %w", in.pid, err)
	}
	if !in.waitGone(killGrace) {
		return fmt.Errorf("process group %d: %w", in.pid, ErrStillRunning)
	}
	return nil
}

// launch starts spec as a child in its own process group, appending its output to its log
// file, and records it in its pidfile.
func launch(spec Spec, hash, pidfile string, log *slog.Logger) (*instance, error) {
	logf, err := os.OpenFile(spec.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("%w %q: open log file: %w", ErrStart, spec.Name, err)
	}
	defer logf.Close()

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = environ(spec.Env)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: Stop signals the whole group, and the terminal's or the
	// supervisor's group signals do not reach it, so it survives the supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrStart, spec.Name, err)
	}
	pid := cmd.Process.Pid
	startedAt := time.Now()
	// The child is never reaped by os/exec (no Wait): the instance's watcher reaps it, and
	// Close can stop watching without waiting for it to exit.
	defer func() { _ = cmd.Process.Release() }()

	// An unreaped child's /proc entry exists even if it has already exited.
	st, err := readProcStat(pid)
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
		return nil, fmt.Errorf("%w %q: read start time of pid %d: %w", ErrStart, spec.Name, pid, err)
	}
	in, err := watchPid(pid, st.startTicks, startedAt, false)
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
		return nil, fmt.Errorf("%w %q: watch pid %d: %w", ErrStart, spec.Name, pid, err)
	}
	rec := pidRecord{Pid: pid, StartTicks: st.startTicks, Hash: hash, StartedAt: startedAt}
	if err := writePidfile(pidfile, rec); err != nil {
		// Without a pidfile the next supervisor would start a second copy: do not run.
		if kerr := in.kill(); kerr != nil {
			log.Error("cannot kill process after failing to write its pidfile", "pid", pid, "err", kerr)
		}
		in.release()
		return nil, fmt.Errorf("%w %q: %w", ErrStart, spec.Name, err)
	}
	_, _ = fmt.Fprintf(logf, "hostplane: started %s as pid %d at %s\n",
		spec.Path, pid, startedAt.Format(time.RFC3339Nano))
	return in, nil
}

// adopt returns the process rec names if it is still running, nil if it is not.
func adopt(rec pidRecord) *instance {
	st, err := readProcStat(rec.Pid)
	if err != nil || st.startTicks != rec.StartTicks || st.dead() || rec.Pid == os.Getpid() {
		return nil
	}
	in, err := watchPid(rec.Pid, rec.StartTicks, rec.StartedAt, true)
	if err != nil {
		return nil
	}
	return in
}

// environ is the child's environment: PATH and HOME, then extra (later entries win).
func environ(extra []string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/"
	}
	return append([]string{"PATH=" + path, "HOME=" + home}, extra...)
}
