// Package apicheck holds Hostplane's HTTP API to its OpenAPI document (pkg/api/openapi.json)
// with a standard validator, kin-openapi: Load parses and validates the document itself, and
// Transport validates every request a client sends and every answer it gets against it, so
// that a test talking to the API through pkg/client fails when the server and the document
// drift apart.
//
// It is a module of its own so that kin-openapi and its dependencies stay out of pkg (which
// every daemon builds with); test modules (test/e2e, and any other that wants it) require it.
package apicheck
