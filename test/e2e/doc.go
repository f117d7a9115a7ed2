// Package e2e tests Hostplane end to end through its public HTTP API, against the real
// `hostplane dev` stack (embedded NATS, a real management apiserver, the six daemons, real
// control-plane processes) and with real client-go clients of the hosted clusters.
//
// The tests run one after another: on the 2-core machines CI runs on, the package shares the
// CPU with every other package of make test, and two stacks at a time (t.Parallel) made the
// package no faster while a wake-on-connect missed client-go's 10 s TLS handshake timeout.
// A check that looks at every process of the machine still narrows to the test's own data
// dir, so the tests could run in parallel on a bigger machine.
package e2e
