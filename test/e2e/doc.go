// Package e2e tests Hostplane end to end through its public HTTP API, against the real
// `hostplane dev` stack (embedded NATS, a real management apiserver, the six daemons, real
// control-plane processes) and with real client-go clients of the hosted clusters.
package e2e
