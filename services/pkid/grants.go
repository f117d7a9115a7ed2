package pkid

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
)

// Guest RBAC of the identities pkid issues that Kubernetes has no binding for: the nodes'
// kube-proxy (NodeProxierGrant), and the autoscaler (Karpenter's core with Hostplane's
// provider, user KarpenterUser). It gets what Karpenter's
// own chart grants its controller, plus what Hostplane's side of it does: installing its CRDs
// and Hostplane's node class CRD, and writing the default node class and the karpenter.sh
// NodePools that stand for autoscaled pools. Nothing else: no Secrets, no RBAC.
const (
	KarpenterUser = "system:hostplane:karpenter"
	// GrantName names every RBAC object of the autoscaler's grants.
	GrantName = "hostplane:karpenter"
	// NodeProxierGrant binds Kubernetes' system:node-proxier role to the nodes (group
	// system:nodes): kube-proxy on a real node uses the node's credential.
	NodeProxierGrant = "hostplane:node-proxier"
	// fieldManager applies the grants.
	grantsManager = "hostplane-pkid"
	// grantRetry bounds the wait between two attempts to apply the grants.
	grantRetryMax = 10 * time.Second
)

// karpenterCRDs are the CustomResourceDefinitions the autoscaler installs and updates.
var karpenterCRDs = []string{
	"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "nodeoverlays.karpenter.sh",
	"hostplanenodeclasses.karpenter.hostplane.dev",
}

func rule(groups, resources, verbs []string, names ...string) *rbacv1ac.PolicyRuleApplyConfiguration {
	r := rbacv1ac.PolicyRule().WithAPIGroups(groups...).WithResources(resources...).WithVerbs(verbs...)
	if len(names) > 0 {
		r.WithResourceNames(names...)
	}
	return r
}

var (
	read  = []string{"get", "list", "watch"}
	write = []string{"create", "delete", "update", "patch"}
)

// KarpenterClusterRules are the autoscaler's cluster-wide permissions in the guest.
func KarpenterClusterRules() []*rbacv1ac.PolicyRuleApplyConfiguration {
	return []*rbacv1ac.PolicyRuleApplyConfiguration{
		rule([]string{"karpenter.sh"}, []string{"nodepools", "nodepools/status", "nodeclaims", "nodeclaims/status", "nodeoverlays", "nodeoverlays/status"}, read),
		rule([]string{"karpenter.sh"}, []string{"nodeclaims", "nodeclaims/status", "nodeclaims/finalizers", "nodepools", "nodepools/status", "nodepools/finalizers"}, write),
		rule([]string{"karpenter.sh"}, []string{"nodeoverlays/status"}, []string{"update", "patch"}),
		rule([]string{"karpenter.hostplane.dev"}, []string{"hostplanenodeclasses", "hostplanenodeclasses/status"}, append(read, write...)),
		rule([]string{""}, []string{"pods", "nodes", "persistentvolumes", "persistentvolumeclaims", "replicationcontrollers", "namespaces"}, read),
		rule([]string{"storage.k8s.io"}, []string{"storageclasses", "csinodes", "volumeattachments"}, read),
		rule([]string{"apps"}, []string{"daemonsets", "deployments", "replicasets", "statefulsets"}, []string{"list", "watch"}),
		rule([]string{"policy"}, []string{"poddisruptionbudgets"}, read),
		rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, append(read, "create")),
		rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, []string{"update", "patch"}, karpenterCRDs...),
		rule([]string{""}, []string{"events"}, []string{"create", "patch"}),
		rule([]string{""}, []string{"nodes"}, []string{"create", "patch", "delete", "update"}),
		rule([]string{""}, []string{"pods/eviction"}, []string{"create"}),
		rule([]string{""}, []string{"pods"}, []string{"delete"}),
	}
}

// applyGrants applies the autoscaler's ClusterRole and its binding, the nodes' kube-proxy
// binding, and the autoscaler's Roles in kube-node-lease (the leases of nodes it deletes) and
// kube-system (the DNS Service it reads).
func applyGrants(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ApplyOptions{FieldManager: grantsManager, Force: true}
	labels := map[string]string{"app.kubernetes.io/managed-by": grantsManager}
	user := rbacv1ac.Subject().WithKind(rbacv1.UserKind).WithAPIGroup(rbacv1.GroupName).WithName(KarpenterUser)
	if _, err := cs.RbacV1().ClusterRoles().Apply(ctx,
		rbacv1ac.ClusterRole(GrantName).WithLabels(labels).WithRules(KarpenterClusterRules()...), opts); err != nil {
		return fmt.Errorf("apply ClusterRole %s: %w", GrantName, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding(GrantName).WithLabels(labels).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(GrantName)).
		WithSubjects(user), opts); err != nil {
		return fmt.Errorf("apply ClusterRoleBinding %s: %w", GrantName, err)
	}
	// kube-proxy on a real node runs with the node's own credential (the kubelet's rotated
	// client certificate, ignition's KubeProxyConfiguration): the nodes get Kubernetes' own
	// role for it, which the Node authorizer does not cover (EndpointSlices).
	if _, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding(NodeProxierGrant).WithLabels(labels).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName("system:node-proxier")).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.GroupKind).WithAPIGroup(rbacv1.GroupName).WithName("system:nodes")), opts); err != nil {
		return fmt.Errorf("apply ClusterRoleBinding %s: %w", NodeProxierGrant, err)
	}
	for ns, rules := range map[string][]*rbacv1ac.PolicyRuleApplyConfiguration{
		"kube-node-lease": {rule([]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "list", "watch", "delete", "patch", "update"})},
		"kube-system":     {rule([]string{""}, []string{"services"}, []string{"get"}, "kube-dns")},
	} {
		if _, err := cs.RbacV1().Roles(ns).Apply(ctx, rbacv1ac.Role(GrantName, ns).WithLabels(labels).WithRules(rules...), opts); err != nil {
			return fmt.Errorf("apply Role %s/%s: %w", ns, GrantName, err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Apply(ctx, rbacv1ac.RoleBinding(GrantName, ns).WithLabels(labels).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(GrantName)).
			WithSubjects(user), opts); err != nil {
			return fmt.Errorf("apply RoleBinding %s/%s: %w", ns, GrantName, err)
		}
	}
	return nil
}

// grant applies the grants until they are in place (the guest's apiserver answered), backing
// off between attempts; it returns when ctx ends.
func (w *csrWatcher) grant(ctx context.Context) {
	wait := csrRetryMin
	for {
		err := applyGrants(ctx, w.cs)
		if err == nil {
			w.log.Info("applied the guest RBAC of the autoscaler and the nodes' kube-proxy", "user", KarpenterUser, "clusterrole", GrantName, "binding", NodeProxierGrant)
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("cannot apply the guest RBAC yet; retrying", "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, grantRetryMax)
	}
}
