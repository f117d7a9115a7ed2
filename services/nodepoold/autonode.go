package nodepoold

import (
	"context"
	"errors"
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// TaintUnregistered is the taint a Karpenter node registers with; Karpenter removes it once it
// has given the Node its NodeClaim's labels and taints (so no pod lands before that).
const TaintUnregistered = "karpenter.sh/unregistered"

// The autonode pool (api.AutoNodePoolName) is how the machines Karpenter launches for a
// cluster with spec.autoNode get what every machine gets from a pool: a bootstrap identity
// that pkid knows, an ignitiond token and userdata (rotated like any pool's), and a release.
// nodepoold keeps it; its MachineDeployment stays at zero replicas and is the template the
// Karpenter provider copies (release and userdata) into each Machine it makes for a NodeClaim.
// Its status counts those machines.

// autoNodeRelease is the release Karpenter's machines run: the control plane's, once its
// rollout completed (a kubelet is never newer than its apiserver); until then the spec's.
func autoNodeRelease(c *api.Cluster) string {
	if v := c.Status.Version; v != nil {
		for _, h := range v.History {
			if h.State == api.UpdateStateCompleted {
				return h.Version
			}
		}
	}
	return c.Spec.Release.Version
}

// autoNodeSpec is the autonode pool's spec for cluster c.
func autoNodeSpec(c *api.Cluster) api.NodePoolSpec {
	zero := int32(0)
	spec := api.NodePoolSpec{
		Replicas: &zero,
		Release:  api.Release{Version: autoNodeRelease(c)},
		Taints:   []api.Taint{{Key: TaintUnregistered, Effect: "NoExecute"}},
		// Karpenter replaces drifted machines; the deployment itself never rolls (0 replicas).
		Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace},
	}
	spec.Default(&c.Spec)
	return spec
}

// ensureAutoNodePool keeps cluster's autonode pool in step with its spec.autoNode: created
// when autoprovisioning is turned on, its release following the control plane's, deleted
// (with its machines) when autoprovisioning is turned off or the cluster goes.
func (d *Daemon) ensureAutoNodePool(ctx context.Context, cluster string) (reconcile.Result, error) {
	c, _, err := d.clusters.Get(ctx, cluster)
	if errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, nil // its pools go by their own reconcile
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read cluster %s: %w", cluster, err)
	}
	key := api.NodePoolKey(cluster, api.AutoNodePoolName)
	np, _, err := d.pools.Get(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return reconcile.Result{}, err
	}
	want := c.DeletionTimestamp == nil && c.Spec.AutoNodeEnabled()
	switch {
	case !want:
		if np != nil && np.DeletionTimestamp == nil && c.DeletionTimestamp == nil {
			_, err := d.requestDeletion(ctx, cluster, api.AutoNodePoolName, "spec.autoNode is off")
			return reconcile.Result{}, err
		}
	case np == nil:
		return reconcile.Result{}, d.createAutoNodePool(ctx, c)
	case np.DeletionTimestamp != nil:
		// Turned off and on again: a new pool once the old one and its machines are gone.
		return reconcile.Result{RequeueAfter: d.cfg.ProgressRequeue}, nil
	case np.Spec.Release.Version != autoNodeRelease(c):
		_, err := d.updateSpec(ctx, cluster, api.AutoNodePoolName, func(spec api.NodePoolSpec) (api.NodePoolSpec, error) {
			spec.Release.Version = autoNodeRelease(c)
			return spec, nil
		})
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// createAutoNodePool stores the autonode pool of c and announces it (nodepool.created), so
// ignitiond mints its token.
func (d *Daemon) createAutoNodePool(ctx context.Context, c *api.Cluster) error {
	np := api.NodePool{Cluster: c.Name, Spec: autoNodeSpec(c)}
	np.Name = api.AutoNodePoolName
	np.Status.ConfigHash = ConfigHash(&np.Spec)
	sent, err := d.record(ctx, c.Name, np.Name, VerbCreated)
	if err != nil {
		return err
	}
	if _, err := d.pools.Create(ctx, api.NodePoolKey(c.Name, np.Name), &np); err != nil {
		if errors.Is(err, store.ErrExists) {
			return nil
		}
		return err
	}
	d.poolLog(c.Name, np.Name).InfoContext(ctx, "autoprovisioning is on: created the pool of Karpenter's machines",
		"release", np.Spec.Release.Version, "config_hash", short(np.Status.ConfigHash))
	d.outbox.Send(ctx, sent)
	d.controller.EnqueueContext(ctx, api.NodePoolKey(c.Name, np.Name))
	return nil
}

// refuseAutoNode is the API's answer to a change of the autonode pool by hand.
func refuseAutoNode(cluster, pool string) error {
	if pool != api.AutoNodePoolName {
		return nil
	}
	return api.Errorf(api.CodeConflict, "node pool %q is kept by cluster %q's spec.autoNode (it holds the machines Karpenter launches); "+
		"change the guest's karpenter.sh NodePools, or turn autoprovisioning off with PATCH /v1/clusters/%s", pool, cluster, cluster)
}
