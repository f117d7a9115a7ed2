package procruntime

import "errors"

// ErrStopped reports work asked of a Runtime whose supervisor was closed (or never opened).
var ErrStopped = errors.New("componentd stopped")
