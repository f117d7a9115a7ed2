package nodepoold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/store"
)

// Event verbs nodepoold publishes on hostplane.evt.<cluster>.nodepool.<verb> (listed in
// events.Published and docs/events.md), with the key "<cluster>/<nodepool>".
const (
	VerbCreated  = events.VerbNodePoolCreated
	VerbUpdated  = events.VerbNodePoolUpdated
	VerbDeleting = events.VerbNodePoolDeleting
	VerbDeleted  = events.VerbNodePoolDeleted
	VerbStatus   = events.VerbNodePoolStatus
	VerbScaled   = events.VerbNodePoolScaled
)

// Routes of the node pool API.
const (
	PathNodePools = "/v1/clusters/{cluster}/nodepools"
	PathNodePool  = "/v1/clusters/{cluster}/nodepools/{nodepool}"
	// PathNodePoolUserData hands out the userdata a machine of the pool boots with (its
	// Ignition stub; a secret: role admin): how a user joins machines of a platform-none
	// pool.
	PathNodePoolUserData = PathNodePool + "/userdata"
)

func (d *Daemon) routes(r chi.Router) {
	r = r.With(d.Started)
	r.Post(PathNodePools, httpapi.Handle(d.createNodePool))
	r.Get(PathNodePools, httpapi.Handle(d.listNodePools))
	r.Get(PathNodePool, httpapi.Handle(d.getNodePool))
	r.Patch(PathNodePool, httpapi.Handle(d.patchNodePool))
	r.Delete(PathNodePool, httpapi.Handle(d.deleteNodePool))
	r.Get(PathNodePoolUserData, httpapi.Handle(d.getUserData))
}

// getUserData answers the pool's current userdata as ignitiond minted it: an Ignition config
// (spec ignition.StubVersion) that fetches the pool's payload with a bearer token. 503 until
// ignitiond has minted it (the message says what it waits for).
func (d *Daemon) getUserData(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	np, err := d.lookup(ctx, chi.URLParam(r, "cluster"), chi.URLParam(r, "nodepool"))
	if err != nil {
		return err
	}
	rec, _, err := d.ignition.Get(ctx, api.NodePoolKey(np.Cluster, np.Name))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.Errorf(api.CodeUnavailable, "node pool %q has no userdata yet: ignitiond has not minted its token", np.Name)
	case err != nil:
		return err
	case !rec.Ready || len(rec.UserData) == 0:
		return api.Errorf(api.CodeUnavailable, "node pool %q has no userdata yet: %s", np.Name, cmp.Or(rec.Message, "ignitiond is minting it"))
	}
	w.Header().Set("Content-Type", ignition.MediaType)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(rec.UserData)
	return nil
}

func (d *Daemon) createNodePool(w http.ResponseWriter, r *http.Request) error {
	var in api.NodePool
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	ctx := r.Context()
	cluster := chi.URLParam(r, "cluster")
	c, err := d.liveCluster(ctx, cluster)
	if err != nil {
		return err
	}
	// Only name and spec are the caller's; the cluster comes from the path, metadata and
	// status are the server's.
	np := api.NodePool{Cluster: cluster, Spec: in.Spec}
	np.Name = in.Name
	np.Spec.Default(&c.Spec)
	if err := api.ValidateNodePool(&np, c, d.checks); err != nil {
		return err
	}
	if err := d.checkQuota(ctx, cluster, np.Name, &np.Spec); err != nil {
		return err
	}
	np.Status.ConfigHash = ConfigHash(&np.Spec)
	// The event first (an event for a pool that turns out to exist is harmless: consumers
	// re-read), then the write.
	sent, err := d.record(ctx, cluster, np.Name, VerbCreated)
	if err != nil {
		return err
	}
	if _, err := d.pools.Create(ctx, api.NodePoolKey(cluster, np.Name), &np); err != nil {
		if errors.Is(err, store.ErrExists) {
			return api.Errorf(api.CodeConflict, "node pool %q of cluster %q already exists", np.Name, cluster)
		}
		return err
	}
	stored, _, err := d.pools.Get(ctx, api.NodePoolKey(cluster, np.Name))
	if err != nil {
		return err
	}
	d.poolLog(cluster, np.Name).InfoContext(ctx, "node pool created", "release", np.Spec.Release.Version,
		"upgrade_type", np.Spec.Management.UpgradeType, "replicas", np.Spec.DesiredReplicas(), "config_hash", short(np.Status.ConfigHash))
	d.outbox.Send(ctx, sent)
	d.controller.EnqueueContext(ctx, api.NodePoolKey(cluster, np.Name))
	httpapi.WriteJSON(w, http.StatusAccepted, stored)
	return nil
}

func (d *Daemon) listNodePools(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	cluster := chi.URLParam(r, "cluster")
	if api.ValidateClusterName(cluster) != nil {
		return clusterNotFound(cluster)
	}
	entries, err := d.pools.List(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		// An unknown cluster is a 404; a known one without pools an empty list.
		if _, _, err := d.clusters.Get(ctx, cluster); errors.Is(err, store.ErrNotFound) {
			return clusterNotFound(cluster)
		} else if err != nil {
			return err
		}
	}
	list := api.NodePoolList{Items: make([]api.NodePool, 0, len(entries))}
	for _, e := range entries {
		list.Items = append(list.Items, *redactConfig(ctx, e.Value))
	}
	slices.SortFunc(list.Items, func(a, b api.NodePool) int { return strings.Compare(a.Name, b.Name) })
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

func (d *Daemon) getNodePool(w http.ResponseWriter, r *http.Request) error {
	np, err := d.lookup(r.Context(), chi.URLParam(r, "cluster"), chi.URLParam(r, "nodepool"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, redactConfig(r.Context(), np))
	return nil
}

// redactConfig returns np with its config documents' contents left out when the caller
// lacks the config grant (auth.GrantConfig): they may hold credentials the machines need.
func redactConfig(ctx context.Context, np *api.NodePool) *api.NodePool {
	if len(np.Spec.Config) == 0 || auth.Has(ctx, auth.GrantConfig) {
		return np
	}
	out := *np
	out.Spec.Config = make([]api.ConfigDocument, len(np.Spec.Config))
	for i, d := range np.Spec.Config {
		out.Spec.Config[i] = api.ConfigDocument{Name: d.Name, Redacted: true}
	}
	return &out
}

// patchNodePool applies a JSON merge patch (RFC 7386) to the pool's spec: either the spec
// itself ({"replicas":5}) or the object with only a spec ({"spec":{"replicas":5}}).
func (d *Daemon) patchNodePool(w http.ResponseWriter, r *http.Request) error {
	if err := refuseAutoNode(chi.URLParam(r, "cluster"), chi.URLParam(r, "nodepool")); err != nil {
		return err
	}
	patch, err := decodeSpecPatch(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	np, err := d.updateSpec(ctx, chi.URLParam(r, "cluster"), chi.URLParam(r, "nodepool"), func(spec api.NodePoolSpec) (api.NodePoolSpec, error) {
		return httpapi.ApplySpecPatch(ctx, spec, patch)
	})
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, np)
	return nil
}

// updateSpec is the one way a pool's spec changes (PATCH and the nodepool.scale inbound
// event): change computes the new spec from the current one, which is defaulted and checked
// with api.ValidateNodePoolUpdate; the config hash is recomputed with it, so ignitiond can
// mint the new userdata at once. A pool or cluster being deleted refuses (Conflict). When the
// spec changed, the generation is bumped and nodepool.updated published.
func (d *Daemon) updateSpec(ctx context.Context, cluster, pool string, change func(api.NodePoolSpec) (api.NodePoolSpec, error)) (*api.NodePool, error) {
	if _, err := d.lookup(ctx, cluster, pool); err != nil {
		return nil, err
	}
	c, err := d.liveCluster(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var before int64
	var oldHash string
	var sent outbox.Entry
	np, _, err := d.pools.MutateBefore(ctx, api.NodePoolKey(cluster, pool), true, func(np *api.NodePool) error {
		before, oldHash = np.Generation, np.Status.ConfigHash
		if np.DeletionTimestamp != nil {
			return api.Errorf(api.CodeConflict, "node pool %q is being deleted; its spec can no longer change", pool)
		}
		spec, err := change(np.Spec)
		if err != nil {
			return err
		}
		spec.Default(&c.Spec)
		if err := api.ValidateNodePoolUpdate(&np.Spec, &spec, c, d.checks); err != nil {
			return err
		}
		if spec.MaxSize() > np.Spec.MaxSize() {
			if err := d.checkQuota(ctx, cluster, pool, &spec); err != nil {
				return err
			}
		}
		np.Spec = spec
		np.Status.ConfigHash = ConfigHash(&spec)
		return nil
	}, func(ctx context.Context, np *api.NodePool) error {
		if np.Generation == before {
			return nil
		}
		var err error
		sent, err = d.record(ctx, cluster, pool, VerbUpdated)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, poolNotFound(cluster, pool)
	}
	if err != nil {
		return nil, err
	}
	if np.Generation != before {
		attrs := []any{"generation", np.Generation, "replicas", np.Spec.DesiredReplicas(), "release", np.Spec.Release.Version}
		if np.Status.ConfigHash != oldHash {
			attrs = append(attrs, "config_hash", short(np.Status.ConfigHash), "previous_config_hash", short(oldHash))
		}
		d.poolLog(cluster, pool).InfoContext(ctx, "node pool spec changed", attrs...)
		d.outbox.Send(ctx, sent)
		d.controller.EnqueueContext(ctx, api.NodePoolKey(cluster, pool))
	}
	return np, nil
}

func (d *Daemon) deleteNodePool(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	cluster, pool := chi.URLParam(r, "cluster"), chi.URLParam(r, "nodepool")
	if _, err := d.lookup(ctx, cluster, pool); err != nil {
		return err
	}
	if err := refuseAutoNode(cluster, pool); err != nil {
		return err
	}
	np, err := d.requestDeletion(ctx, cluster, pool, "requested through the API")
	if errors.Is(err, store.ErrNotFound) {
		return poolNotFound(cluster, pool)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusAccepted, np)
	return nil
}

// liveCluster returns the named cluster: NotFound when it does not exist, Conflict while it
// is being deleted.
func (d *Daemon) liveCluster(ctx context.Context, name string) (*api.Cluster, error) {
	if api.ValidateClusterName(name) != nil {
		return nil, clusterNotFound(name)
	}
	c, _, err := d.clusters.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, clusterNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	if c.DeletionTimestamp != nil {
		return nil, api.Errorf(api.CodeConflict, "cluster %q is being deleted; its node pools can no longer be created or changed", name)
	}
	return c, nil
}

// lookup returns the named pool, or a NotFound error (also for names no pool can have).
func (d *Daemon) lookup(ctx context.Context, cluster, pool string) (*api.NodePool, error) {
	if api.ValidateClusterName(cluster) != nil || api.ValidateNodePoolName(pool) != nil {
		return nil, poolNotFound(cluster, pool)
	}
	np, _, err := d.pools.Get(ctx, api.NodePoolKey(cluster, pool))
	if errors.Is(err, store.ErrNotFound) {
		return nil, poolNotFound(cluster, pool)
	}
	return np, err
}

func clusterNotFound(name string) error {
	return api.Errorf(api.CodeNotFound, "cluster %q not found", name)
}

func poolNotFound(cluster, pool string) error {
	return api.Errorf(api.CodeNotFound, "node pool %q of cluster %q not found", pool, cluster)
}

// record stores the pool event verb in the outbox. It is called before the write the event
// is about (a failure leaves the pool unwritten); the entry is sent once the write
// succeeded, and published by the relay otherwise.
func (d *Daemon) record(ctx context.Context, cluster, pool, verb string) (outbox.Entry, error) {
	e, err := d.outbox.Record(ctx, cluster, events.ResourceNodePool, verb, eventKey(cluster, pool), nil)
	if err != nil {
		return e, fmt.Errorf("record nodepool.%s of %s: %w", verb, eventKey(cluster, pool), err)
	}
	return e, nil
}
