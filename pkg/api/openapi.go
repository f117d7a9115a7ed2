package api

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3 document of hostplane's HTTP API (openapi.json beside this
// file), as served on /openapi.json. Callers must not modify it.
func OpenAPI() []byte { return openAPI }
