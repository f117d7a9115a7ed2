// Package testenv starts real dependencies for tests, each scoped to one test and cleaned up
// with it: a kube-apiserver with its etcd (KubeAPIServer), in nats.go NATS, and in
// prometheus.go a Prometheus that scrapes a target and evaluates rule files (Prometheus).
//
// A dependency whose binaries are not built skips the test with instructions to build them,
// or fails it under CI=true, where nothing that matters may be skipped. Prometheus and promtool
// (PrometheusTool) fail the test when missing, CI or not, saying to run tools/prometheus.sh.
package testenv
