package mgmtcluster

import "errors"

var (
	// ErrInvalidConfig wraps every Config.Validate problem.
	ErrInvalidConfig = errors.New("invalid management cluster config")
	// ErrMissing means a program the cluster needs is not installed or not built; the
	// message says how to get it.
	ErrMissing = errors.New("missing prerequisite")
	// ErrNotRoot means the process is not root (namespaces, mounts, cgroups need it).
	ErrNotRoot = errors.New("management cluster needs root")
)
