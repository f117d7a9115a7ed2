// Package audit is kube-apiserver's audit logging for a guest cluster: the audit.k8s.io/v1
// Policy of each profile of spec.configuration.apiServer.audit, kube-apiserver's audit flags,
// and reading the newest events back from a cluster's audit log files (current and rotated,
// of every replica).
package audit
