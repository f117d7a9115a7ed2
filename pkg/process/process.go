// Package process supervises the child processes hostplane runs (etcd, kube-apiserver, ...):
// each in its own process group, with args, env, a log file and a pidfile, a readiness probe,
// restart with backoff, graceful stop, and re-adoption of a still-running child after the
// supervisor itself restarts.
package process

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Probe reports whether a process is ready. It is called until it returns nil.
type Probe func(ctx context.Context) error

// Spec describes one supervised process. Name is unique within a Supervisor's state dir and
// names its pidfile (<dir>/<name>.pid) and, unless LogFile is set, its log (<dir>/<name>.log).
type Spec struct {
	Name    string
	Path    string
	Args    []string
	Env     []string // added to a minimal environment (PATH, HOME); not the caller's whole env
	Dir     string   // working directory; default the state dir
	LogFile string   // output is appended here; a relative path is relative to the state dir
	Probe   Probe    // nil: running counts as ready
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL (default 10s).
	StopTimeout time.Duration
	// Restart backoff: first delay (default 200ms), doubling up to MaxBackoff (default 30s).
	InitialBackoff, MaxBackoff time.Duration
}

const (
	defaultStopTimeout    = 10 * time.Second
	defaultInitialBackoff = 200 * time.Millisecond
	defaultMaxBackoff     = 30 * time.Second
)

// Hash identifies the spec's command line (path, args, env, dir). A re-adopted process must
// have been started from a spec with the same Hash. It is a stable hex string: the same
// spec hashes the same in every build and on every machine. A nil and an empty Args (or Env)
// hash alike.
func (s Spec) Hash() string {
	h := sha256.New()
	var buf [binary.MaxVarintLen64]byte
	putInt := func(n int) { h.Write(buf[:binary.PutUvarint(buf[:], uint64(n))]) }
	putString := func(v string) { putInt(len(v)); h.Write([]byte(v)) }
	putList := func(l []string) {
		putInt(len(l))
		for _, v := range l {
			putString(v)
		}
	}
	putString("hostplane/process.Spec/v1")
	putString(s.Path)
	putList(s.Args)
	putList(s.Env)
	putString(s.Dir)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func (s Spec) validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("%w: no name", ErrInvalidSpec)
	case s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, "/\x00"):
		return fmt.Errorf("%w: name %q is not a plain file name", ErrInvalidSpec, s.Name)
	case s.Path == "":
		return fmt.Errorf("%w %q: no path", ErrInvalidSpec, s.Name)
	case s.StopTimeout < 0 || s.InitialBackoff < 0 || s.MaxBackoff < 0:
		return fmt.Errorf("%w %q: negative duration", ErrInvalidSpec, s.Name)
	}
	return nil
}

// withDefaults fills in what the caller left out; dir is the state dir.
func (s Spec) withDefaults(dir string) Spec {
	s.Args = slices.Clone(s.Args)
	s.Env = slices.Clone(s.Env)
	if s.Dir == "" {
		s.Dir = dir
	}
	switch {
	case s.LogFile == "":
		s.LogFile = filepath.Join(dir, s.Name+".log")
	case !filepath.IsAbs(s.LogFile):
		s.LogFile = filepath.Join(dir, s.LogFile)
	}
	if s.StopTimeout == 0 {
		s.StopTimeout = defaultStopTimeout
	}
	if s.InitialBackoff == 0 {
		s.InitialBackoff = defaultInitialBackoff
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = defaultMaxBackoff
	}
	s.MaxBackoff = max(s.MaxBackoff, s.InitialBackoff)
	return s
}

// State is a supervised process's current state.
type State string

const (
	StateStarting   State = "Starting"   // running, probe not yet passed
	StateReady      State = "Ready"      // probe passed
	StateRestarting State = "Restarting" // exited; waiting for backoff before restarting
	StateStopped    State = "Stopped"
)

// Status is a snapshot of a supervised process.
type Status struct {
	Name      string
	State     State
	Pid       int // 0 while Restarting and once Stopped
	Restarts  int
	Adopted   bool // true when the current pid was found running and re-adopted
	StartedAt time.Time
	LastError string // the last exit status, failed restart or failed probe
}

// Supervisor starts and watches processes whose state (pidfiles, logs) lives in one directory.
// Its methods are safe for concurrent use. Only one Supervisor may use a directory at a time.
type Supervisor struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	closed   bool
	procs    map[string]*Process
	starting map[string]chan struct{} // names with a Start in flight; closed when it ends
	wg       sync.WaitGroup           // Starts in flight and run loops
}

// NewSupervisor returns a supervisor keeping pidfiles and logs under dir (created if missing).
// log may be nil (slog.Default()).
func NewSupervisor(dir string, log *slog.Logger) (*Supervisor, error) {
	if dir == "" {
		return nil, errors.New("process: no state dir")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("process: state dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("process: state dir: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Supervisor{
		dir:      abs,
		log:      log,
		procs:    make(map[string]*Process),
		starting: make(map[string]chan struct{}),
	}, nil
}

// Dir returns the supervisor's state directory (absolute).
func (s *Supervisor) Dir() string { return s.dir }

// LeftRunning returns the pid of the process an earlier supervisor started under name and
// left running: its pidfile names a live process that started when the pidfile says (so a
// reused pid does not count). ok is false when there is none.
func (s *Supervisor) LeftRunning(name string) (pid int, ok bool) {
	rec, err := readPidfile(s.pidfilePath(name))
	if err != nil {
		return 0, false
	}
	st, err := readProcStat(rec.Pid)
	if err != nil || st.startTicks != rec.StartTicks || st.dead() || rec.Pid == os.Getpid() {
		return 0, false
	}
	return rec.Pid, true
}

func (s *Supervisor) pidfilePath(name string) string {
	return filepath.Join(s.dir, name+".pid")
}

// Start starts spec, or re-adopts the process its pidfile names when that process is still
// alive and was started from a spec with the same Hash (checked against the pidfile). A live
// process from a different spec is stopped and replaced. The process is restarted with
// backoff whenever it exits, until Stop. Start returns once the process runs; use
// Process.WaitReady for the probe.
//
// Starting a name this Supervisor already runs returns that Process when the Hash is the
// same; otherwise the running process is stopped and replaced. Concurrent Starts of one
// name are serialised. ctx bounds the wait for such a Start and for stopping a replaced
// process.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	hash := spec.Hash()
	spec = spec.withDefaults(s.dir)
	log := s.log.With("process", spec.Name)

	done, err := s.begin(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	defer done()

	s.mu.Lock()
	old := s.procs[spec.Name]
	s.mu.Unlock()
	if old != nil {
		if old.hash == hash && old.supervised() {
			return old, nil
		}
		log.Info("spec changed; replacing the process", "hash", hash, "old_hash", old.hash)
		if err := old.Stop(ctx); err != nil {
			return nil, fmt.Errorf("process %q: stop the process it replaces: %w", spec.Name, err)
		}
	}

	in, err := s.adoptOrClear(spec, hash, log)
	if err != nil {
		return nil, err
	}
	if in != nil {
		log.Info("re-adopted running process", "pid", in.pid, "started_at", in.startedAt)
	} else {
		if in, err = launch(spec, hash, s.pidfilePath(spec.Name), log); err != nil {
			return nil, err
		}
		log.Info("started", "pid", in.pid, "path", spec.Path)
	}

	p := newProcess(s, spec, hash, log, in)
	s.mu.Lock()
	if s.closed {
		// Closed while we were starting: leave the process running for the next
		// supervisor, like every other.
		s.mu.Unlock()
		in.release()
		return nil, ErrClosed
	}
	s.procs[spec.Name] = p
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		p.run(in)
	}()
	return p, nil
}

// begin waits until no other Start of name is in flight and marks one in flight; the
// returned func ends it.
func (s *Supervisor) begin(ctx context.Context, name string) (func(), error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		busy, ok := s.starting[name]
		if !ok {
			ch := make(chan struct{})
			s.starting[name] = ch
			s.wg.Add(1)
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.starting, name)
				s.mu.Unlock()
				close(ch)
				s.wg.Done()
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("process %q: waiting for another Start: %w", name, ctx.Err())
		}
	}
}

// adoptOrClear looks at the pidfile for spec: it returns the running process when it was
// started from the same spec; otherwise it stops that process, if any still runs, and
// removes the pidfile.
func (s *Supervisor) adoptOrClear(spec Spec, hash string, log *slog.Logger) (*instance, error) {
	path := s.pidfilePath(spec.Name)
	rec, err := readPidfile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		log.Warn("ignoring unreadable pidfile", "err", err)
		return nil, removePidfile(path)
	}
	in := adopt(rec)
	switch {
	case in == nil:
		log.Info("removing stale pidfile", "pid", rec.Pid)
		return nil, removePidfile(path)
	case rec.Hash == hash:
		return in, nil
	}
	if hash == "" { // Terminate: stop it whatever it runs
		log.Info("stopping the process an earlier supervisor started", "pid", rec.Pid, "hash", rec.Hash)
	} else {
		log.Info("running process was started from another spec; stopping it",
			"pid", rec.Pid, "hash", hash, "old_hash", rec.Hash)
	}
	err = in.terminate(spec.StopTimeout, log)
	in.release()
	if err != nil {
		return nil, fmt.Errorf("process %q: stop pid %d: %w", spec.Name, rec.Pid, err)
	}
	return nil, removePidfile(path)
}

// forget drops p from the supervised processes once it has stopped.
func (s *Supervisor) forget(p *Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.spec.Name] == p {
		delete(s.procs, p.spec.Name)
	}
}

// Get returns the supervised process of that name, if any. A stopped process is no longer
// supervised.
func (s *Supervisor) Get(name string) (*Process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[name]
	return p, ok
}

// List returns the status of every supervised process, by name.
func (s *Supervisor) List() []Status {
	s.mu.Lock()
	procs := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	out := make([]Status, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.Status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close stops watching every process WITHOUT stopping them: their pidfiles stay, so a new
// Supervisor on the same dir re-adopts them. This is what a restarting daemon does.
// Close waits for Stops and Starts in flight; after it, Start and StopAll return ErrClosed.
// Close is idempotent.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	procs := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.detach()
	}
	s.wg.Wait()
	return nil
}

// StopAll stops every supervised process concurrently and removes their pidfiles.
func (s *Supervisor) StopAll(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	procs := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Process is one supervised process.
type Process struct {
	sup  *Supervisor
	spec Spec // with defaults
	hash string
	log  *slog.Logger

	// ctx is cancelled when Stop or Close asks the run loop to end; done is closed when
	// it has.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	status  Status
	changed chan struct{} // closed and replaced on every change of status or end
	end     endRequest
	stopErr error
}

// endRequest says why a process's run loop is asked to end. The first request wins.
type endRequest int

const (
	endNone   endRequest = iota
	endStop              // Stop: terminate the process, remove the pidfile
	endDetach            // Close: leave the process and its pidfile alone
)

func newProcess(s *Supervisor, spec Spec, hash string, log *slog.Logger, in *instance) *Process {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{
		sup:     s,
		spec:    spec,
		hash:    hash,
		log:     log,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	p.status = Status{Name: spec.Name, Pid: in.pid, Adopted: in.adopted, StartedAt: in.startedAt}
	p.status.State = p.runningState()
	return p
}

// runningState is the state of a process that has just started: without a probe, running
// counts as ready.
func (p *Process) runningState() State {
	if p.spec.Probe == nil {
		return StateReady
	}
	return StateStarting
}

// supervised reports whether p is neither stopping nor detached.
func (p *Process) supervised() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end == endNone
}

// update changes the status under the lock and wakes WaitReady.
func (p *Process) update(f func(*Status)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.status)
	p.notifyLocked()
}

func (p *Process) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// requestEnd asks the run loop to end for why, unless an earlier request stands; it
// returns the request that stands.
func (p *Process) requestEnd(why endRequest) endRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end == endNone {
		p.end = why
		p.cancel()
		p.notifyLocked()
	}
	return p.end
}

func (p *Process) detach() { p.requestEnd(endDetach) }

// Spec returns the spec the process runs, with defaults filled in.
func (p *Process) Spec() Spec { return p.spec }

// Status returns a snapshot.
func (p *Process) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// WaitReady blocks until the probe passes (or, without a probe, the process runs), ctx ends,
// or the process is stopped (ErrStopped). After its supervisor's Close, WaitReady returns
// nil if the process was ready and ErrClosed if not.
func (p *Process) WaitReady(ctx context.Context) error {
	for {
		p.mu.Lock()
		st, end, changed, lastErr := p.status.State, p.end, p.changed, p.status.LastError
		p.mu.Unlock()
		switch {
		case end == endStop || st == StateStopped:
			return fmt.Errorf("process %q: %w", p.spec.Name, ErrStopped)
		case st == StateReady:
			return nil
		case end == endDetach:
			return fmt.Errorf("process %q: %w", p.spec.Name, ErrClosed)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if lastErr != "" {
				return fmt.Errorf("process %q not ready (%s, last error: %s): %w",
					p.spec.Name, st, lastErr, ctx.Err())
			}
			return fmt.Errorf("process %q not ready (%s): %w", p.spec.Name, st, ctx.Err())
		}
	}
}

// Stop sends SIGTERM to the process group, waits up to StopTimeout, then SIGKILLs it, and
// removes the pidfile. Stop is idempotent. If ctx ends first, Stop returns its error and the
// stop completes in the background. Stop after the supervisor's Close returns ErrClosed and
// leaves the process running.
func (p *Process) Stop(ctx context.Context) error {
	if p.requestEnd(endStop) == endDetach {
		return fmt.Errorf("process %q: %w", p.spec.Name, ErrClosed)
	}
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stopErr
	case <-ctx.Done():
		return fmt.Errorf("process %q: waiting for it to stop: %w", p.spec.Name, ctx.Err())
	}
}

// Terminate stops the process called name: the supervised one as Process.Stop does, or else
// the still-running process its pidfile names (left by an earlier Supervisor and not
// re-adopted), and removes the pidfile. A name with neither is a no-op. Processes of other
// names are untouched. It is how a daemon that restarted tears down what it no longer
// wants without first re-adopting it.
func (s *Supervisor) Terminate(ctx context.Context, name string) error {
	if p, ok := s.Get(name); ok {
		return p.Stop(ctx)
	}
	spec := Spec{Name: name, Path: "-"}
	if err := spec.validate(); err != nil {
		return err
	}
	spec = spec.withDefaults(s.dir)
	done, err := s.begin(ctx, name)
	if err != nil {
		return err
	}
	defer done()
	if p, ok := s.Get(name); ok { // started while we waited
		return p.Stop(ctx)
	}
	// An empty hash never matches a pidfile's: a live process is stopped.
	_, err = s.adoptOrClear(spec, "", s.log.With("process", name))
	return err
}
