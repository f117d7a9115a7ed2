package lb

import "errors"

var (
	// ErrNoBackends: a load balancer needs at least one kube-apiserver backend.
	ErrNoBackends = errors.New("load balancer has no backends")
	// ErrBackendNotReady: a load balancer backend answered its readiness probe with a failure.
	ErrBackendNotReady = errors.New("backend not ready")
)
