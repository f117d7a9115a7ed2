package process

import "errors"

var (
	// ErrInvalidSpec reports a Spec that cannot be started (no name, a name that is not a
	// plain file name, no path, negative durations).
	ErrInvalidSpec = errors.New("invalid process spec")

	// ErrStart reports that a process could not be started: its log file could not be
	// opened, the exec failed (errors.Is(err, fs.ErrNotExist) for a missing binary), or its
	// pidfile could not be written.
	ErrStart = errors.New("cannot start process")

	// ErrClosed reports a call on a Supervisor after Close, or on a Process whose
	// supervisor was closed before the process was stopped.
	ErrClosed = errors.New("process supervisor closed")

	// ErrStopped reports waiting for a process that has been stopped.
	ErrStopped = errors.New("process stopped")

	// ErrProbeFailed reports a probe that reached the process but got an unhealthy answer,
	// such as a non-2xx HTTP status.
	ErrProbeFailed = errors.New("probe failed")

	// ErrStillRunning reports a process group that survived SIGKILL for several seconds
	// (typically a process stuck in uninterruptible sleep).
	ErrStillRunning = errors.New("process group still running after SIGKILL")
)
