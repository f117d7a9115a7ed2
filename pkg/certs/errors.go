package certs

import "errors"

var (
	// ErrNotCA is returned when a key pair that is not a CA is asked to issue a certificate.
	ErrNotCA = errors.New("certificate is not a CA")
	// ErrInvalidRequest is returned for a Request that cannot be issued.
	ErrInvalidRequest = errors.New("invalid certificate request")
	// ErrNoPEM is returned when input holds no PEM block of the expected type.
	ErrNoPEM = errors.New("no PEM block found")
	// ErrKeyMismatch is returned when a private key does not belong to a certificate.
	ErrKeyMismatch = errors.New("private key does not match certificate")
)
