// Package release is hostplane's catalogue of runnable Kubernetes releases: for each version,
// the etcd it runs with, the images the kubernetes runtime deploys and where the process
// runtime finds the binaries (built once into the cache by `make k8s-bins`).
//
// Adding a release means generating its tools module (tools/k8s-bins/gen-module.sh <version>)
// and adding one entry to the catalogue in release.go.
package release
