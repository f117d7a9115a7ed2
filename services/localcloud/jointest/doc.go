// Package jointest holds the local cloud's tests against a real guest control plane (run by
// the real infrad, pkid and componentd): machines join, run pods, apply in-place updates and
// resume after a restart. It is a package of its own so the local cloud's own tests do not
// depend on those daemons building.
package jointest
