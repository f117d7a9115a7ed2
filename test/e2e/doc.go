// Package e2e tests Hostplane end to end through its public HTTP API, against the real
// `hostplane dev` stack (embedded NATS, a real management apiserver, the six daemons, real
// control-plane processes) and with real client-go clients of the hosted clusters.
//
// A test that starts its own stack (its own data dir, ports and management cluster) calls
// t.Parallel(): go test then runs two of them at a time, after the sequential ones, so the
// package's long waits (nodes joining, rollouts) overlap instead of adding up. A test stays
// sequential when it sets the process environment (t.Setenv panics in a parallel test) or
// process-wide state, or when its checks have a deadline shared by many steps. A check that
// looks at every process of the machine must narrow it to the test's own data dir.
package e2e
