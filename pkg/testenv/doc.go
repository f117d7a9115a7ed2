// Package testenv starts real dependencies for tests, each scoped to one test and cleaned up
// with it: a kube-apiserver with its etcd (KubeAPIServer) and, in nats.go, NATS.
//
// A dependency whose binaries are not built skips the test with instructions to build them,
// or fails it under CI=true, where nothing that matters may be skipped.
package testenv
