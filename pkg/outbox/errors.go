package outbox

import "errors"

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("outbox: invalid config")

// ErrNotAnEvent reports an outbox entry the relay cannot publish (not written by Record).
var ErrNotAnEvent = errors.New("outbox: entry is not an event")
