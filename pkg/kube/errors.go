package kube

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// ErrInvalidKubeconfig is returned for a KubeconfigSpec that cannot make a usable kubeconfig.
var ErrInvalidKubeconfig = errors.New("invalid kubeconfig spec")

// IsNotFound reports an error that says the object does not exist: the apiserver answered
// NotFound, or it does not serve the object's kind at all (a client's REST mapper found no
// match: the CRD is not installed, so there is no such object either).
func IsNotFound(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}
