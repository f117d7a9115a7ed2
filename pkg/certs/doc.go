// Package certs holds the small crypto helpers every hostplane PKI user shares: ECDSA P-256
// key pairs, self-signed CAs, leaf certificates issued from them for clients, servers or
// both, PEM encoding and parsing, and service-account signing keys. It keeps no state; pkid
// builds the cluster PKI on top of it.
package certs
