package events

import "errors"

var (
	// ErrBadSubject is returned for a subject that does not follow the grammar.
	ErrBadSubject = errors.New("bad event subject")
	// ErrBadEvent is returned for a payload that is not a valid CloudEvent.
	ErrBadEvent = errors.New("bad event")
)
