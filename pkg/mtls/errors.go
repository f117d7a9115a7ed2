package mtls

import "errors"

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("management TLS: bad configuration")
