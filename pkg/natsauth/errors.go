package natsauth

import "errors"

// ErrBadName is returned for an identity name that cannot be a subject token or file name.
var ErrBadName = errors.New("identity names are lower-case letters, digits, '-' and '_'")

// ErrBadIdentity is returned for an identity that cannot be minted or revoked as asked.
var ErrBadIdentity = errors.New("invalid identity")

// ErrIdentityExists is returned by Mint for a name already in use.
var ErrIdentityExists = errors.New("identity exists")

// ErrUnknownIdentity is returned by Revoke for a name nobody minted.
var ErrUnknownIdentity = errors.New("no such identity")

// ErrTLSPair is returned for a client TLS configuration with a certificate and no key, or a
// key and no certificate.
var ErrTLSPair = errors.New("a client certificate needs both its certificate file and its key file")

// ErrTLSHosts is returned by GenerateTLS without a host to issue the server certificate for.
var ErrTLSHosts = errors.New("a server certificate needs at least one host")
