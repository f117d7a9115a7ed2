package componentd

import (
	"errors"

	"github.com/hostplane/hostplane/services/componentd/procruntime"
)

var (
	// ErrUnsupportedRuntime reports a Config.Runtime other than "process" or "kubernetes".
	ErrUnsupportedRuntime = errors.New("unsupported control-plane runtime")
	// ErrNoManagementKubeconfig reports the kubernetes runtime without
	// Config.ManagementKubeconfig.
	ErrNoManagementKubeconfig = errors.New("the kubernetes runtime needs the management cluster's kubeconfig")
	// ErrStopped reports work asked of a componentd that has stopped.
	ErrStopped = procruntime.ErrStopped
)
