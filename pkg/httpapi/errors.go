package httpapi

import "errors"

var (
	// ErrServerStarted is returned by Server.Start when the server was started before.
	ErrServerStarted = errors.New("httpapi: server already started")
	// ErrPanic is the cause recorded for a request whose handler panicked.
	ErrPanic = errors.New("httpapi: handler panicked")
)
