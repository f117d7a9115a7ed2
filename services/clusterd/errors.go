package clusterd

import "errors"

// ErrNamespaceTerminating reports a cluster's control-plane namespace in the management
// cluster that is still being deleted (a former cluster of the same name): its Cluster API
// objects are written once it is gone.
var ErrNamespaceTerminating = errors.New("control-plane namespace is terminating")
