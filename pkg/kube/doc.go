// Package kube builds kubeconfigs and Kubernetes clients from them: the one place hostplane
// turns a server URL, a CA and credentials (a client certificate or a bearer token) into
// something kubectl and client-go accept.
package kube
