// Package integration is the tier between a daemon's own tests and test/e2e: tests that run
// one daemon against the real daemons it depends on (componentd with the real pkid and infrad,
// ignitiond and pkid's CSR approver against a real guest control plane, the local cloud's
// machines joining one), each in a package named after the daemon under test.
//
// They live here, in a module of their own, so that no daemon's module imports another
// daemon: each service builds and tests alone, and only this module and test/e2e see them all.
package integration
