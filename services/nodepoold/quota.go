package nodepoold

import (
	"context"

	"github.com/hostplane/hostplane/pkg/api"
)

// checkQuota refuses (409) giving pool of cluster the size of spec when the cluster's pools,
// or every cluster's, would then ask for more machines than the machine quotas allow
// (Config.MachineQuotaPerCluster, Config.MachineQuotaTotal). Pools being deleted still
// count: their machines are still there. Two requests at the same moment may both pass: the
// quotas bound what the plane is asked for, they are not a reservation.
func (d *Daemon) checkQuota(ctx context.Context, cluster, pool string, spec *api.NodePoolSpec) error {
	entries, err := d.pools.List(ctx)
	if err != nil {
		return err
	}
	size := int(spec.MaxSize())
	inCluster, total := size, size
	for _, e := range entries {
		np := e.Value
		if np.Cluster == cluster && np.Name == pool {
			continue
		}
		n := int(np.Spec.MaxSize())
		total += n
		if np.Cluster == cluster {
			inCluster += n
		}
	}
	switch {
	case inCluster > d.cfg.MachineQuotaPerCluster:
		return api.Errorf(api.CodeConflict, "cluster %q's node pools would ask for %d machines, more than the %d a cluster may have (nodepoold --machine-quota-per-cluster); make a pool smaller or delete one first",
			cluster, inCluster, d.cfg.MachineQuotaPerCluster)
	case total > d.cfg.MachineQuotaTotal:
		return api.Errorf(api.CodeConflict, "the node pools of every cluster would ask for %d machines, more than the %d this management plane takes (nodepoold --machine-quota-total)",
			total, d.cfg.MachineQuotaTotal)
	}
	return nil
}
