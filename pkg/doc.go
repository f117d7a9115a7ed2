// Package pkg holds hostplane's shared libraries. It has no main package and never imports a
// daemon under services/: the api types and validation, events (CloudEvents envelope and
// subjects), bus (NATS and JetStream), store (typed KV with compare-and-swap), reconcile (the
// keyed work queue), httpapi, observe, process (the supervisor), release (the catalogue of
// runnable Kubernetes releases), localkube and testenv.
package pkg
