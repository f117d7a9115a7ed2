package kuberuntime

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/hostplane/hostplane/pkg/api"
)

// The autoscaler's objects besides its Deployment: its guest kubeconfig and its identity in
// the management cluster (the ServiceAccount and the RoleBinding carry this name). The
// binding grants, in the cluster's namespace only, the ClusterRole KarpenterClusterRole that
// the deployment ships (deploy/k8s, with KarpenterRules): componentd may bind that one role
// and holds none of its permissions itself.
const (
	SecretKarpenterKubeconfig = "karpenter-kubeconfig"
	KarpenterServiceAccount   = api.ComponentKarpenter
	KarpenterClusterRole      = "hostplane-karpenter"
)

// KarpenterBinary is hostplane-karpenter's path in Karpenter.Image.
const KarpenterBinary = "/usr/local/bin/hostplane-karpenter"

// karpenterUser is the guest identity of the autoscaler's certificate (pkid's).
const karpenterUser = "system:hostplane:karpenter"

// clusterAPIGroup is Cluster API's core group.
const clusterAPIGroup = "cluster.x-k8s.io"

// KarpenterRules are what hostplane-karpenter's cloud provider
// (cmd/hostplane-karpenter/internal/provider) does in the cluster's namespace of the
// management cluster, through a client without a cache (it never watches): it lists the
// pools' MachineDeployments and scales them by a patch, lists, marks (patch) and deletes
// Machines, and creates the standalone Machine and LocalMachine of an autoprovisioned node
// (Cluster API deletes the LocalMachine with its Machine).
func KarpenterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{clusterAPIGroup}, Resources: []string{"machinedeployments"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{clusterAPIGroup}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		{APIGroups: []string{api.InfrastructureGroup}, Resources: []string{"localmachines"}, Verbs: []string{"create"}},
	}
}

// karpenter runs hostplane-karpenter from the componentd image. It reaches the guest with
// its kubeconfig Secret and the management cluster with its ServiceAccount's token
// (in-cluster config: no --management-kubeconfig). One replica, replaced by Recreate:
// Karpenter's decisions are not split, so leader election is off.
func (in *Inputs) karpenter() workload {
	env := func(name, value string) *corev1ac.EnvVarApplyConfiguration {
		return corev1ac.EnvVar().WithName(name).WithValue(value)
	}
	return workload{
		component: api.ComponentKarpenter,
		image:     in.Karpenter.Image,
		command:   KarpenterBinary,
		args: append([]string{
			"--kubeconfig=" + secretFile(SecretKarpenterKubeconfig, KeyKubeconfig),
			"--namespace=" + Namespace(in.Cluster),
			"--cluster=" + in.Cluster,
		}, in.Karpenter.Options.AutoscalerFlags()...),
		env: []*corev1ac.EnvVarApplyConfiguration{
			env("METRICS_PORT", strconv.Itoa(KarpenterMetricsPort)),
			env("HEALTH_PROBE_PORT", strconv.Itoa(KarpenterHealthPort)),
			env("DISABLE_LEADER_ELECTION", "true"),
			env("LOG_LEVEL", "info"),
		},
		ports: []*corev1ac.ContainerPortApplyConfiguration{
			containerPort("metrics", KarpenterMetricsPort), containerPort("health", KarpenterHealthPort)},
		secrets:        []string{SecretKarpenterKubeconfig},
		scratch:        []scratchDir{{"tmp", "/tmp"}},
		serviceAccount: KarpenterServiceAccount,
		recreate:       true,
		// It installs its CRDs into the guest before it serves: give it the time
		// kube-apiserver takes to come up.
		startup:     startupProbe(corev1.URISchemeHTTP, "/healthz", KarpenterHealthPort),
		readiness:   readinessProbe(corev1.URISchemeHTTP, "/readyz", KarpenterHealthPort),
		liveness:    httpProbe(corev1.URISchemeHTTP, "/healthz", KarpenterHealthPort, 10, 6),
		requests:    quantities("50m", "128Mi"),
		gracePeriod: 30,
	}
}

// karpenterSecret is the autoscaler's guest kubeconfig: pkid's karpenter certificate (the
// identity of its api.KubeconfigKarpenter) against the kube-apiserver Service, as the
// kube-controller-manager and kube-scheduler kubeconfigs.
func (in *Inputs) karpenterSecret(r pkiReader, serverName string, rootCA []byte) (secret, error) {
	certPEM, keyPEM, err := r.keyPair(api.CertKarpenter)
	if err != nil {
		return secret{}, err
	}
	kc, err := inClusterKubeconfig(in.Cluster, serverName, rootCA, certPEM, keyPEM, karpenterUser)
	if err != nil {
		return secret{}, err
	}
	return secret{name: SecretKarpenterKubeconfig, component: api.ComponentKarpenter, typ: corev1.SecretTypeOpaque,
		data: map[string][]byte{KeyKubeconfig: kc}}, nil
}

// karpenterIdentity is the autoscaler's ServiceAccount and its binding, in the namespace, to
// the ClusterRole KarpenterClusterRole.
func karpenterIdentity(cluster string) (*corev1ac.ServiceAccountApplyConfiguration, *rbacv1ac.RoleBindingApplyConfiguration) {
	ns, l := Namespace(cluster), labels(cluster, api.ComponentKarpenter)
	sa := corev1ac.ServiceAccount(KarpenterServiceAccount, ns).WithLabels(l)
	binding := rbacv1ac.RoleBinding(KarpenterServiceAccount, ns).WithLabels(l).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(KarpenterClusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(KarpenterServiceAccount).WithNamespace(ns))
	return sa, binding
}
