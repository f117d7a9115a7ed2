package kuberuntime

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
)

// kube-apiserver's audit log: the policy comes from a Secret like every other input (it is
// not secret, but the Secrets are what this runtime mounts and hashes), the log goes to an
// emptyDir volume of the pod, rotated by kube-apiserver within the cluster's retention.
const (
	SecretAuditPolicy = "kube-apiserver-audit-policy"
	KeyAuditPolicy    = "policy.yaml"
	// AuditVolume is the name of the kube-apiserver pods' volume holding the audit log
	// (AuditLogPath) and its rotated backups. It lives as long as the pod.
	AuditVolume  = "audit"
	AuditLogPath = "/var/log/kubernetes/audit/kube-apiserver.log"
)

// auditPolicySecret is the Secret holding the cluster's audit policy.
func (in *Inputs) auditPolicySecret() (secret, error) {
	policy, err := audit.PolicyFile(in.Audit.Profile)
	if err != nil {
		return secret{}, err
	}
	return secret{name: SecretAuditPolicy, component: api.ComponentKubeAPIServer, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyAuditPolicy: policy}}, nil
}

// withAudit adds the audit flags, the policy and the log volume to kube-apiserver's pod.
func (in *Inputs) withAudit(w workload) workload {
	w.args = append(w.args, audit.Flags(in.Audit, secretFile(SecretAuditPolicy, KeyAuditPolicy), AuditLogPath)...)
	w.secrets = append(w.secrets, SecretAuditPolicy)
	w.scratch = append(w.scratch, scratchDir{AuditVolume, path.Dir(AuditLogPath)})
	return w
}
