package ignitiond

import "errors"

var (
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrIndexNotSynced: the token index has not read every record yet.
	ErrIndexNotSynced = errors.New("the token index is not synced yet")
	// ErrNoCertificate: the cluster's PKI has no usable ignition-server certificate.
	ErrNoCertificate = errors.New("no ignition-server certificate")
	// ErrNoRootCA: the cluster's PKI has no root CA (certificate or key).
	ErrNoRootCA = errors.New("no root CA")
	// ErrNoNodeBinary: a real node's payload needs a node binary (kubelet, kube-proxy) of a
	// release this host has not built (the wrapped error says how to build it).
	ErrNoNodeBinary = errors.New("the release's node binaries are not here")
	// ErrPoolGone: a token's pool has no record any more; its tokens are being removed.
	ErrPoolGone = errors.New("the token's nodepool is gone")
	// ErrStopping: ignitiond is shutting down and opens no listener.
	ErrStopping = errors.New("ignitiond is stopping")
)

// ErrWatchEnded: the KV watch of the token records stopped on its own.
var ErrWatchEnded = errors.New("the watch ended")
