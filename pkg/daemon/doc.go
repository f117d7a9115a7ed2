// Package daemon is the lifecycle every hostplane daemon shares: connect to NATS (with
// retry), create the streams and the daemon's own KV buckets, build its controllers, serve
// the admin endpoints (/healthz, /readyz, /metrics, /openapi.json and the daemon's /v1
// routes), and shut down in order — consumers drain, then HTTP, then traces flush, then NATS
// closes.
//
// The admin router checks bearer tokens (pkg/auth) from Base.Auth, or from Base.TokensFile
// (--tokens-file, HOSTPLANE_TOKENS_FILE) and Base.AdminToken (HOSTPLANE_ADMIN_TOKEN). A daemon
// binary (flags parsed by Flags) with none of them refuses to start unless it is given
// --insecure-no-auth; an embedding process that sets none (tests) serves the admin router
// without access control and logs a warning. hostplane dev serves no admin router: its front
// door does access control for every daemon.
//
// A service declares itself with a Spec and embeds *Daemon, so hostplane dev and the tests
// run exactly the code the daemon's own main runs.
package daemon
