package localkube

import "errors"

var (
	// ErrInvalidConfig is returned by Start for a Config it cannot run.
	ErrInvalidConfig = errors.New("invalid localkube config")
	// ErrNotReady is returned by Start when etcd or kube-apiserver does not become ready.
	ErrNotReady = errors.New("not ready")
)
