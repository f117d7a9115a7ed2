package kube

import "errors"

// ErrInvalidKubeconfig is returned for a KubeconfigSpec that cannot make a usable kubeconfig.
var ErrInvalidKubeconfig = errors.New("invalid kubeconfig spec")
