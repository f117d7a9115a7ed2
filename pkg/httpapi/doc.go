// Package httpapi holds the HTTP pieces every hostplane daemon shares: a chi router with the
// standard middleware stack and the /healthz, /readyz and /metrics endpoints, problem+json
// errors mapped from api.Error codes in one table, strict JSON decoding, and a Server that
// runs until its context ends.
//
// A daemon builds its router with NewRouter, adds its /v1 routes with r.Route or r.Mount
// (or more middleware with r.With and r.Group; the built-in stack is already in place, so
// r.Use on the returned router panics — pass extra middleware in Config.Middlewares instead),
// writes handlers as HandlerFunc that return errors, and serves it with NewServer(...).Start(ctx).
//
// Config.OpenAPI serves the API's description on /openapi.json; access control (pkg/auth)
// goes in Config.Middlewares. Long-lived answers (Server-Sent Events) flush through the
// router's middleware with http.ResponseController and end when Closing(ctx) closes, so a
// shutdown does not wait for them.
package httpapi
