package provider

import "errors"

var (
	// ErrNoCloud: the provider runs without a local cloud, so it has no machine to act on.
	ErrNoCloud = errors.New("no local cloud")
	// ErrMachineNotFound: the cluster has no machine of that name.
	ErrMachineNotFound = errors.New("machine not found")
	// ErrUnknownFault: the local cloud does not know the fault asked for.
	ErrUnknownFault = errors.New("unknown fault")
)
