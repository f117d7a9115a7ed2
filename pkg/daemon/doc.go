// Package daemon is the lifecycle every hostplane daemon shares: connect to NATS (with
// retry), create the streams and the daemon's own KV buckets, build its controllers, serve
// the admin endpoints (/healthz, /readyz, /metrics and the daemon's /v1 routes), and shut
// down in order — consumers drain, then HTTP, then traces flush, then NATS closes.
//
// A service declares itself with a Spec and embeds *Daemon, so hostplane dev and the tests
// run exactly the code the daemon's own main runs.
package daemon
