package api

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies an application error. The HTTP layer maps each code to one status in one
// table (httpapi); nothing else decides a status.
type Code string

const (
	CodeInvalid         Code = "invalid"          // the request is malformed or fails validation (400)
	CodeNotFound        Code = "not-found"        // the named object does not exist (404)
	CodeConflict        Code = "conflict"         // exists already, or changed concurrently (409)
	CodeUnauthenticated Code = "unauthenticated"  // no or bad credentials (401)
	CodeForbidden       Code = "forbidden"        // credentials lack the role (403)
	CodeTooLarge        Code = "too-large"        // the body is over the limit (413)
	CodeUnsupported     Code = "unsupported-type" // wrong Content-Type (415)
	CodeMethod          Code = "method-not-allowed"
	CodeTooMany         Code = "too-many-requests" // the caller holds as much as it may at once (429)
	CodeUnavailable     Code = "unavailable"       // a dependency is not ready; retry later (503)
	CodeInternal        Code = "internal"          // a bug or an unexpected failure (500); details are logged, not returned
)

// FieldError names one invalid field by its JSON path (for example "spec.release.version").
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Error is hostplane's one application error. Message is safe to show to the caller.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	Err     error // the cause; logged, never shown
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Detail)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err's application error, or CodeInternal if it has none.
func ErrorCode(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return CodeInternal
}

// FieldErrors accumulates validation errors; Err returns nil when there are none.
type FieldErrors []FieldError

// Add records that field is invalid.
func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Err returns an Invalid error listing the fields, or nil.
func (fe FieldErrors) Err() error {
	if len(fe) == 0 {
		return nil
	}
	return &Error{Code: CodeInvalid, Message: "the request has invalid fields", Fields: fe}
}
