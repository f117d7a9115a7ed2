package auth

import "errors"

var (
	// ErrNoTokens is returned by New for a configuration without a single token.
	ErrNoTokens = errors.New("auth: no tokens configured")
	// ErrBadToken is returned for a token entry that is not valid (empty, unknown role,
	// duplicate, bad cluster name).
	ErrBadToken = errors.New("auth: bad token entry")
)
