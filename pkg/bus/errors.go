package bus

import "errors"

// ErrNotReady is returned when the embedded server does not accept connections in time.
var ErrNotReady = errors.New("nats server not ready")

// ErrNoAuth is returned for a change of users on a server that was started without any: it
// accepts everyone, and a reload cannot make it stop.
var ErrNoAuth = errors.New("the server was started without users")

// ErrNoTLS is returned for a TLS reload on a server that was started without TLS.
var ErrNoTLS = errors.New("the server was started without TLS")

// ErrTLSFiles is returned for a server TLS configuration without a certificate or a key.
var ErrTLSFiles = errors.New("tls needs a certificate file and a key file")
