package clusterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
)

// Event verbs clusterd publishes on hostplane.evt.<cluster>.cluster.<verb> (listed in
// events.Published and docs/events.md).
const (
	VerbCreated  = events.VerbClusterCreated
	VerbUpdated  = events.VerbClusterUpdated
	VerbDeleting = events.VerbClusterDeleting
	VerbDeleted  = events.VerbClusterDeleted
	VerbStatus   = events.VerbClusterStatus
)

// ContentTypeYAML is the media type of the kubeconfig answer.
const ContentTypeYAML = "application/yaml"

func (d *Daemon) routes(r chi.Router) {
	r = r.With(d.Started)
	r.Post("/v1/clusters", httpapi.Handle(d.createCluster))
	r.Get("/v1/clusters", httpapi.Handle(d.listClusters))
	r.Get("/v1/clusters/{cluster}", httpapi.Handle(d.getCluster))
	r.Patch("/v1/clusters/{cluster}", httpapi.Handle(d.patchCluster))
	r.Delete("/v1/clusters/{cluster}", httpapi.Handle(d.deleteCluster))
	r.Get("/v1/clusters/{cluster}/kubeconfig", httpapi.Handle(d.getKubeconfig))
	r.Get(PathEvents, httpapi.Handle(d.streamEvents))
}

func (d *Daemon) createCluster(w http.ResponseWriter, r *http.Request) error {
	var in api.Cluster
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	// Only name and spec are the caller's; metadata and status are the server's.
	c := api.Cluster{Spec: in.Spec}
	c.Name = in.Name
	c.Spec.Default()
	if err := api.ValidateCluster(&c, d.releases); err != nil {
		return err
	}
	ctx := r.Context()
	if err := d.checkRestoreSource(ctx, &c.Spec); err != nil {
		return err
	}
	// The installation's bound (two creates at once may both pass: it bounds, it does not
	// count exactly).
	if keys, err := d.clusters.Keys(ctx); err != nil {
		return err
	} else if len(keys) >= d.cfg.MaxClusters && !slices.Contains(keys, c.Name) {
		return api.Errorf(api.CodeConflict, "there are %d clusters, the most this installation holds (clusterd --max-clusters %d): delete one first",
			len(keys), d.cfg.MaxClusters)
	}
	// The event first (an event for a name that turns out to exist is harmless: consumers
	// re-read), then the write.
	sent, err := d.record(ctx, c.Name, VerbCreated)
	if err != nil {
		return err
	}
	if _, err := d.clusters.Create(ctx, c.Name, &c); err != nil {
		if errors.Is(err, store.ErrExists) {
			return api.Errorf(api.CodeConflict, "cluster %q already exists", c.Name)
		}
		return err
	}
	d.clusterLog(c.Name).InfoContext(ctx, "cluster created", "release", c.Spec.Release.Version,
		"platform", c.Spec.Platform.Type, "policy", c.Spec.ControllerAvailabilityPolicy)
	d.outbox.Send(ctx, sent)
	d.controller.EnqueueContext(ctx, c.Name)
	httpapi.WriteJSON(w, http.StatusAccepted, c)
	return nil
}

func (d *Daemon) listClusters(w http.ResponseWriter, r *http.Request) error {
	entries, err := d.clusters.List(r.Context())
	if err != nil {
		return err
	}
	list := api.ClusterList{Items: make([]api.Cluster, 0, len(entries))}
	for _, e := range entries {
		if auth.Allowed(r.Context(), e.Value.Name) { // a token scoped to clusters lists only those
			list.Items = append(list.Items, *e.Value)
		}
	}
	slices.SortFunc(list.Items, func(a, b api.Cluster) int { return strings.Compare(a.Name, b.Name) })
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

func (d *Daemon) getCluster(w http.ResponseWriter, r *http.Request) error {
	c, _, err := d.lookup(r.Context(), chi.URLParam(r, "cluster"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, c)
	return nil
}

// patchCluster applies a JSON merge patch (RFC 7386) to the cluster's spec. The patch is
// either the spec itself ({"release":{"version":"1.34.4"}}) or the object with only a spec
// ({"spec":{"release":{"version":"1.34.4"}}}), as kubectl sends it.
func (d *Daemon) patchCluster(w http.ResponseWriter, r *http.Request) error {
	var patch json.RawMessage
	if err := httpapi.DecodeJSON(r, &patch); err != nil {
		return err
	}
	specPatch, err := httpapi.SpecOfPatch(patch, `{"release":{"version":"1.34.4"}}`,
		"status", "name", "generation", "creationTimestamp", "deletionTimestamp")
	if err != nil {
		return err
	}
	ctx := r.Context()
	c, err := d.updateSpec(ctx, chi.URLParam(r, "cluster"), api.HibernationReasonRequested, func(spec api.ClusterSpec) (api.ClusterSpec, error) {
		return httpapi.ApplySpecPatch(ctx, spec, specPatch)
	})
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, c)
	return nil
}

// updateSpec is the one way a cluster's spec changes (PATCH and the cluster.upgrade inbound
// event): change computes the new spec from the current one, which is defaulted and checked
// with api.ValidateClusterUpdate (release.CheckUpgrade among others); a cluster being deleted
// refuses (Conflict). When the spec changed, the generation is bumped and cluster.updated
// published. A missing cluster is a NotFound api.Error. When the change hibernates or wakes
// the cluster, status.hibernation records why (reason, an api.HibernationReason*).
func (d *Daemon) updateSpec(ctx context.Context, name, reason string, change func(api.ClusterSpec) (api.ClusterSpec, error)) (*api.Cluster, error) {
	if _, _, err := d.lookup(ctx, name); err != nil {
		return nil, err
	}
	var before int64
	var sent outbox.Entry
	c, _, err := d.clusters.MutateBefore(ctx, name, true, func(c *api.Cluster) error {
		before = c.Generation
		if c.DeletionTimestamp != nil {
			return api.Errorf(api.CodeConflict, "cluster %q is being deleted; its spec can no longer change", name)
		}
		spec, err := change(c.Spec)
		if err != nil {
			return err
		}
		spec.Default()
		if err := api.ValidateClusterUpdate(&c.Spec, &spec, d.releases); err != nil {
			return err
		}
		if spec.Hibernating() != c.Spec.Hibernating() {
			noteHibernation(c, reason, d.cfg.Clock.Now())
		}
		c.Spec = spec
		return nil
	}, func(ctx context.Context, c *api.Cluster) error {
		if c.Generation == before {
			return nil
		}
		var err error
		sent, err = d.record(ctx, name, VerbUpdated)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, err
	}
	if c.Generation != before {
		d.clusterLog(name).InfoContext(ctx, "cluster spec changed", "generation", c.Generation, "release", c.Spec.Release.Version)
		d.outbox.Send(ctx, sent)
		d.controller.EnqueueContext(ctx, name)
	}
	return c, nil
}

func (d *Daemon) deleteCluster(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	name := chi.URLParam(r, "cluster")
	if _, _, err := d.lookup(ctx, name); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	requested := false
	var sent outbox.Entry
	c, _, err := d.clusters.MutateBefore(ctx, name, false, func(c *api.Cluster) error {
		requested = false
		if c.DeletionTimestamp != nil {
			return store.ErrNoChange
		}
		c.DeletionTimestamp = &now
		c.Status.Conditions.Set(api.Condition{
			Type: api.ConditionDeleting, Status: api.ConditionTrue, Reason: ReasonDeletionRequested,
			Message: "waiting for componentd to stop the control plane", ObservedGeneration: c.Generation,
		}, now)
		requested = true
		return nil
	}, func(ctx context.Context, _ *api.Cluster) (err error) {
		sent, err = d.record(ctx, name, VerbDeleting)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound(name)
	}
	if err != nil {
		return err
	}
	if requested {
		d.clusterLog(name).InfoContext(ctx, "cluster deletion requested")
		d.outbox.Send(ctx, sent)
		d.controller.EnqueueContext(ctx, name)
	}
	httpapi.WriteJSON(w, http.StatusAccepted, c)
	return nil
}

func (d *Daemon) getKubeconfig(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	name := chi.URLParam(r, "cluster")
	c, _, err := d.lookup(ctx, name)
	if err != nil {
		return err
	}
	if c.DeletionTimestamp != nil {
		return api.Errorf(api.CodeConflict, "cluster %q is being deleted; its kubeconfig is no longer handed out", name)
	}
	notReady := api.Errorf(api.CodeUnavailable,
		"the admin kubeconfig of cluster %q is not ready yet: pkid issues it once the infrastructure is ready; see the PKIReady condition", name)
	p, _, err := d.pki.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return notReady
	}
	if err != nil {
		return err
	}
	sealed := p.Kubeconfigs[api.KubeconfigAdmin]
	if !p.Ready || len(sealed) == 0 {
		return notReady
	}
	key, err := d.sealKey()
	if err != nil {
		return fmt.Errorf("seal key %s: %w", d.cfg.SealKeyFile, err)
	}
	kubeconfig, err := key.Open(sealed)
	if err != nil {
		return fmt.Errorf("open the admin kubeconfig of %s (is %s the key pkid seals with?): %w", name, d.cfg.SealKeyFile, err)
	}
	w.Header().Set("Content-Type", ContentTypeYAML)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(kubeconfig)
	return nil
}

// lookup returns the named cluster, or a NotFound error (also for names no cluster can have).
func (d *Daemon) lookup(ctx context.Context, name string) (*api.Cluster, uint64, error) {
	if api.ValidateClusterName(name) != nil {
		return nil, 0, notFound(name)
	}
	c, rev, err := d.clusters.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, notFound(name)
	}
	return c, rev, err
}

func notFound(name string) error {
	return api.Errorf(api.CodeNotFound, "cluster %q not found", name)
}

// record stores the cluster event verb in the outbox. It is called before the write the
// event is about (a failure leaves the cluster unwritten); the entry is sent once the write
// succeeded, and published by the relay otherwise.
func (d *Daemon) record(ctx context.Context, name, verb string) (outbox.Entry, error) {
	e, err := d.outbox.Record(ctx, name, events.ResourceCluster, verb, name, nil)
	if err != nil {
		return e, fmt.Errorf("record cluster.%s of %s: %w", verb, name, err)
	}
	return e, nil
}

// checkRestoreSource checks that a new cluster's spec.restoreFrom names a complete backup
// whose release the cluster's release may run (the same or the next minor).
func (d *Daemon) checkRestoreSource(ctx context.Context, s *api.ClusterSpec) error {
	from := s.RestoreFrom
	if from == nil {
		return nil
	}
	field := func(format string, args ...any) error {
		var fe api.FieldErrors
		fe.Add("spec.restoreFrom.backup", format, args...)
		return fe.Err()
	}
	b, _, err := d.backups.Get(ctx, api.BackupKey(from.Cluster, from.Backup))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return field("cluster %q has no backup %q (GET /v1/clusters/%s/backups lists them)", from.Cluster, from.Backup, from.Cluster)
	case err != nil:
		return err
	case !b.IsComplete():
		c, _ := b.Status.Conditions.Get(api.ConditionComplete)
		return field("backup %s/%s is not complete (%s: %s)", from.Cluster, from.Backup, c.Reason, c.Message)
	}
	if b.Status.Version != "" && b.Status.Version != s.Release.Version {
		if err := release.CheckUpgrade(b.Status.Version, s.Release.Version); err != nil {
			var fe api.FieldErrors
			fe.Add("spec.release.version", "the backup was taken at release %s; a cluster restored from it runs that release or the next minor: %v", b.Status.Version, err)
			return fe.Err()
		}
	}
	return nil
}
