package process

import (
	"context"
	"errors"
	"math"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// stableAfter is how long a process must stay up for its restart backoff to start again
// from InitialBackoff (passing a probe also resets it).
const stableAfter = 10 * time.Second

// run is the process's one goroutine: it probes the running instance, restarts it with
// backoff when it exits, and on Stop or Close ends it or lets it go. in is running when run
// is called.
func (p *Process) run(in *instance) {
	defer close(p.done)
	// InitialBackoff doubling per restart up to MaxBackoff; a fresh one after a stable run.
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: p.spec.InitialBackoff, Factor: 2, Cap: p.spec.MaxBackoff, Steps: math.MaxInt}
	}
	backoff := newBackoff()
	lastExit := "" // how the previous run ended: LastError again once probes pass
	for {
		if in != nil {
			probed := p.supervise(in, lastExit)
			if p.ctx.Err() != nil {
				p.finish(in)
				return
			}
			in.release()
			if probed || time.Since(in.startedAt) >= stableAfter {
				backoff = newBackoff()
			}
			if in.groupAlive() {
				// The leader is gone but processes it started linger in its group; they
				// would hold its ports and files against the next run.
				p.log.Warn("killing what is left of the exited process's group", "pgid", in.pid)
				_ = unix.Kill(-in.pid, unix.SIGKILL)
			}
			p.log.Warn("process exited; restarting", "pid", in.pid, "status", in.reason, "backoff", backoff.Duration)
			p.update(func(s *Status) {
				s.State = StateRestarting
				s.Pid = 0
				s.LastError = in.reason
			})
			lastExit = in.reason
			in = nil
		}

		delay := backoff.Step()
		if !p.sleep(delay) {
			p.finish(nil)
			return
		}
		next, err := launch(p.spec, p.hash, p.sup.pidfilePath(p.spec.Name), p.log)
		if err != nil {
			p.log.Error("restart failed", "err", err, "after", delay, "backoff", backoff.Duration)
			lastExit = err.Error()
			p.update(func(s *Status) { s.LastError = lastExit })
			continue
		}
		in = next
		p.log.Info("restarted", "pid", in.pid)
		p.update(func(s *Status) {
			s.State = p.runningState()
			s.Pid = in.pid
			s.Adopted = false
			s.StartedAt = in.startedAt
			s.Restarts++
		})
	}
}

// supervise probes in until it is ready, then waits; it returns when in exits or the run
// loop is asked to end, and reports whether a probe passed. Probe errors show in LastError
// until a probe passes; then LastError is lastExit again.
func (p *Process) supervise(in *instance, lastExit string) (probed bool) {
	if probe := p.spec.Probe; probe != nil {
		t := time.NewTimer(0)
		defer t.Stop()
		for !probed {
			select {
			case <-p.ctx.Done():
				return false
			case <-in.exited:
				return false
			case <-t.C:
			}
			if err := p.probeOnce(probe); err != nil {
				p.log.Debug("not ready", "pid", in.pid, "err", err)
				p.update(func(s *Status) { s.LastError = "probe: " + err.Error() })
				t.Reset(probeInterval)
				continue
			}
			probed = true
		}
		p.log.Info("ready", "pid", in.pid)
		p.update(func(s *Status) {
			s.State = StateReady
			s.LastError = lastExit
		})
	}
	select {
	case <-p.ctx.Done():
	case <-in.exited:
	}
	return probed
}

func (p *Process) probeOnce(probe Probe) error {
	ctx, cancel := context.WithTimeout(p.ctx, probeTimeout)
	defer cancel()
	return probe(ctx)
}

// sleep waits d, or less when the run loop is asked to end (then it returns false).
func (p *Process) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// finish ends the run loop as Stop or Close asked; in is the running instance, if any.
func (p *Process) finish(in *instance) {
	p.mu.Lock()
	end := p.end
	p.mu.Unlock()
	if end == endDetach {
		if in != nil {
			in.release()
			p.log.Info("no longer watching; left running", "pid", in.pid)
		}
		return
	}

	var errs []error
	if in != nil {
		p.log.Info("stopping", "pid", in.pid)
		errs = append(errs, in.terminate(p.spec.StopTimeout, p.log))
		in.release()
	}
	errs = append(errs, removePidfile(p.sup.pidfilePath(p.spec.Name)))
	err := errors.Join(errs...)
	p.sup.forget(p)
	p.mu.Lock()
	p.stopErr = err
	p.status.State = StateStopped
	p.status.Pid = 0
	p.notifyLocked()
	p.mu.Unlock()
	if err != nil {
		p.log.Error("stopped, with errors", "err", err)
	} else {
		p.log.Info("stopped")
	}
}
