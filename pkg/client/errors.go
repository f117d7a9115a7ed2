package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// ErrUnreachable wraps every failure to reach the server at all (connection refused, DNS,
// TLS, a timeout before any answer).
var ErrUnreachable = errors.New("cannot reach the hostplane API")

// Error is an answer of the server that is not a success: its problem+json body (RFC 9457)
// or, when the body is not one, a problem made up from the status.
type Error struct {
	Method string
	URL    string
	// Status is the HTTP status code.
	Status int
	// Problem is the decoded body.
	Problem httpapi.Problem
}

// Error prints the problem's detail and its field errors, one per line:
//
//	the request has invalid fields
//	  name: must be a DNS label ...
func (e *Error) Error() string {
	var b strings.Builder
	detail := e.Problem.Detail
	if detail == "" {
		detail = fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	b.WriteString(detail)
	for _, f := range e.Problem.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Detail)
	}
	if e.Status >= 500 && e.Problem.RequestID != "" && !strings.Contains(detail, e.Problem.RequestID) {
		fmt.Fprintf(&b, "\n  (request id %s)", e.Problem.RequestID)
	}
	return b.String()
}

// Code is the application error code of the answer.
func (e *Error) Code() api.Code { return e.Problem.Code() }

// RouteMissing reports whether the server has no route for the request's path at all (as
// opposed to a route that answers "this object does not exist"): the feature is not served.
func (e *Error) RouteMissing() bool {
	return e.Status == http.StatusNotFound && strings.HasPrefix(e.Problem.Detail, "no route for ")
}

// CodeOf returns the application error code of err when it is (or wraps) an *Error, else "".
func CodeOf(err error) api.Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code()
	}
	return ""
}

// IsNotFound reports whether err is a 404 answer for an object (not a missing route).
func IsNotFound(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Code() == api.CodeNotFound && !e.RouteMissing()
}

// IsRouteMissing reports whether err says the server does not serve the path at all.
func IsRouteMissing(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.RouteMissing()
}
