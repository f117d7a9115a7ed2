package kuberuntime

import "errors"

var (
	// ErrInvalidInputs reports Inputs that cannot be rendered (no cluster, unknown policy,
	// a release without an image).
	ErrInvalidInputs = errors.New("invalid inputs")
	// ErrIncompletePKI reports a ClusterPKI that lacks a certificate, key or kubeconfig the
	// control plane needs.
	ErrIncompletePKI = errors.New("incomplete PKI")
	// ErrCertificateSANs reports a serving certificate that does not name a host the
	// control plane reaches it by inside the management cluster.
	ErrCertificateSANs = errors.New("certificate does not cover the in-cluster host")
	// ErrNamespaceTerminating reports an Apply into a namespace that is being deleted.
	ErrNamespaceTerminating = errors.New("control-plane namespace is terminating")
)
