package componentd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// karpenterName is the autoscaler's executable (cmd/hostplane-karpenter).
const karpenterName = "hostplane-karpenter"

// findKarpenter looks for hostplane-karpenter beside this program's executable, then on
// PATH; "" when neither has it (the autoscaler then reports that it cannot run).
func findKarpenter() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), karpenterName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(karpenterName); err == nil {
		return p
	}
	return ""
}

// autoscaler is the karpenter component's configuration for cluster c: it runs while the
// cluster has an autoscaled NodePool or the autonode pool of autoprovisioning (spec.autoNode),
// one being deleted included. The nodes Karpenter added
// carry its finalizer and their NodeClaims its termination logic, so it stays until the
// pool's machines are gone, through a cluster's deletion too.
func (d *Daemon) autoscaler(ctx context.Context, c *api.Cluster) (component.Autoscaler, error) {
	a := component.Autoscaler{
		Binary:               d.cfg.KarpenterBinary,
		ManagementKubeconfig: d.cfg.ManagementKubeconfig,
		Namespace:            api.ControlPlaneNamespace(c.Name),
		Options:              c.Spec.EffectiveAutoscaling(),
	}
	pools, err := d.nodePools.List(ctx, api.ClusterPartsFilter(c.Name))
	if err != nil {
		return a, err
	}
	for _, p := range pools {
		if p.Value.Spec.AutoScaling != nil || p.Value.Name == api.AutoNodePoolName {
			a.Enabled = true
			break
		}
	}
	return a, nil
}
