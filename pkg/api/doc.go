// Package api holds hostplane's wire types (the public /v1 resources and the objects each
// daemon keeps in its KV bucket), their validation, and the one application error type that
// every boundary maps to a response. It depends on the standard library only.
package api
