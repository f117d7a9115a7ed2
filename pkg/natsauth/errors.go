package natsauth

import "errors"

// ErrBadName is returned for an identity name that cannot be a subject token or file name.
var ErrBadName = errors.New("identity names are lower-case letters, digits, '-' and '_'")
