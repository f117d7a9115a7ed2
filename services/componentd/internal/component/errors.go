package component

import "errors"

var (
	// ErrUnknownComponent reports a component name that is not one of Names().
	ErrUnknownComponent = errors.New("unknown control-plane component")
	// ErrIncompletePKI reports a PKI record that lacks a certificate, key or kubeconfig a
	// component needs.
	ErrIncompletePKI = errors.New("incomplete PKI")
	// ErrIncompleteInfra reports an infra record with fewer ports than the replicas need.
	ErrIncompleteInfra = errors.New("incomplete infra allocation")
	// ErrCannotRun reports a component this host cannot run as configured: the autoscaler
	// without its executable or without the management cluster's kubeconfig.
	ErrCannotRun = errors.New("cannot run here")
)
