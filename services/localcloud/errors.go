package localcloud

import (
	"errors"

	"github.com/hostplane/hostplane/services/localcloud/ignitionfs"
)

var (
	// ErrNotFound is returned when the named machine does not exist.
	ErrNotFound = errors.New("localcloud: machine not found")
	// ErrUnknownFault is returned for a fault type that is not one of api.Fault*.
	ErrUnknownFault = errors.New("localcloud: unknown fault")
	// ErrInvalid is returned for a malformed machine spec or request.
	ErrInvalid = errors.New("localcloud: invalid request")
	// ErrNotRunning is returned by Client and Cloud calls made while the cloud is not serving.
	ErrNotRunning = errors.New("localcloud: not running")
	// ErrInvalidConfig is the cause of a boot or an update whose Ignition config (the stub or
	// the fetched one) does not parse or validate; the message carries the library's report.
	ErrInvalidConfig = ignitionfs.ErrInvalid
	// ErrUsage is returned by Command for bad flags (exit code 2).
	ErrUsage = errors.New("localcloud: usage")

	// errBootFault is the cause of a boot failed by the FailNextBoot fault.
	errBootFault = errors.New("boot failed: injected fault FailNextBoot")
	// errSuperseded aborts a boot or an update whose userdata was replaced meanwhile.
	errSuperseded = errors.New("superseded by newer userdata")
	// errStatusNotPosted is the cause of an in-place update whose new Node status the
	// apiserver did not take.
	errStatusNotPosted = errors.New("the apiserver did not take it")
)
