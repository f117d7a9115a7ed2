package bus

import "errors"

// ErrNotReady is returned when the embedded server does not accept connections in time.
var ErrNotReady = errors.New("nats server not ready")
