package guest

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/provider"
)

// The karpenter.sh NodePool of an autoscaled pool carries the pool's shape and the cluster's
// options: only its instance type, its labels (not Karpenter's restricted ones) and taints,
// max−min nodes, consolidation after the unneeded time, no disruption with ScaleUpOnly, and
// the pods' grace period as the nodes' termination grace period.
func TestShape_CarriesThePoolAndTheClusterOptions(t *testing.T) {
	view := provider.PoolView{Name: "workers", InstanceType: "local.small", Min: 1, Max: 4,
		Labels: map[string]string{"tier": "web", "node.kubernetes.io/instance-type": "local.small", "karpenter.sh/nodepool": "x"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}}
	for _, tc := range []struct {
		name   string
		opts   Options
		budget string
		grace  *time.Duration
	}{
		{"scale down, grace period", Options{ScaleDown: true, UnneededTime: 30 * time.Second, MaxPodGracePeriod: 45 * time.Second}, "10%", ptr(45 * time.Second)},
		{"scale up only, no grace period", Options{ScaleDown: false, UnneededTime: time.Minute}, "0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var np karpv1.NodePool
			(&Syncer{Options: tc.opts}).shape(&np, view)
			spec := np.Spec.Template.Spec
			if len(spec.Requirements) != 1 || spec.Requirements[0].Key != corev1.LabelInstanceTypeStable || spec.Requirements[0].Values[0] != "local.small" {
				t.Errorf("requirements %+v", spec.Requirements)
			}
			if l := np.Spec.Template.Labels; len(l) != 1 || l["tier"] != "web" {
				t.Errorf("template labels %v, want only tier=web", l)
			}
			if len(spec.Taints) != 1 || spec.Taints[0].Key != "dedicated" {
				t.Errorf("taints %+v", spec.Taints)
			}
			if n := np.Spec.Limits["nodes"]; n.Value() != 3 {
				t.Errorf("limit %s nodes, want 3 (max−min)", n.String())
			}
			if d := np.Spec.Disruption.ConsolidateAfter.Duration; d == nil || *d != tc.opts.UnneededTime {
				t.Errorf("consolidateAfter %v, want %s", d, tc.opts.UnneededTime)
			}
			if b := np.Spec.Disruption.Budgets; len(b) != 1 || b[0].Nodes != tc.budget {
				t.Errorf("budgets %+v, want %s", b, tc.budget)
			}
			switch g := spec.TerminationGracePeriod; {
			case tc.grace == nil && g != nil, tc.grace != nil && (g == nil || g.Duration != *tc.grace):
				t.Errorf("terminationGracePeriod %v, want %v", g, tc.grace)
			}
			if np.Labels[LabelManagedBy] != ManagedBy {
				t.Errorf("labels %v lack %s=%s", np.Labels, LabelManagedBy, ManagedBy)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
