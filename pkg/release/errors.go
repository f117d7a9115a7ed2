package release

import "errors"

var (
	// ErrUnknownComponent is returned by Binary for a component hostplane does not run.
	ErrUnknownComponent = errors.New("unknown component")
	// ErrBinaryMissing is returned by Binary when the release's binary has not been built.
	ErrBinaryMissing = errors.New("binary not built")
	// ErrBadSelection is returned by ParseSelection for a selection it cannot parse.
	ErrBadSelection = errors.New("bad tuning selection")
)
