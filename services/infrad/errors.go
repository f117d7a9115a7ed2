package infrad

import "errors"

var (
	// ErrNoBackends: a load balancer needs at least one kube-apiserver backend.
	ErrNoBackends = errors.New("load balancer has no backends")
	// ErrNoFreePort: the allocator could not find a port no cluster records.
	ErrNoFreePort = errors.New("no free port")
	// ErrBackendNotReady: a load balancer backend answered its readiness probe with a failure.
	ErrBackendNotReady = errors.New("backend not ready")
)
