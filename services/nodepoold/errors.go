package nodepoold

import "errors"

var (
	// ErrClusterAPIMode reports a Config.ClusterAPI that is neither in-process nor external.
	ErrClusterAPIMode = errors.New("unknown Cluster API mode")
	// ErrManagementNotReady reports a management cluster whose CRDs or caches are not ready.
	ErrManagementNotReady = errors.New("the management cluster is not ready")
)
