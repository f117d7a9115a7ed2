package componentd

import "errors"

var (
	// ErrUnsupportedRuntime reports a Config.Runtime other than "process".
	ErrUnsupportedRuntime = errors.New("unsupported control-plane runtime")
	// ErrStopped reports work asked of a componentd that has stopped.
	ErrStopped = errors.New("componentd stopped")
)
