package pkid

import (
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
)

// Routes.
const (
	PathPKI       = "/v1/clusters/{cluster}/pki"
	PathPKIRotate = "/v1/clusters/{cluster}/pki/rotate"
)

func (d *Daemon) routes(r chi.Router) {
	r = r.With(d.Started)
	r.Get(PathPKI, httpapi.Handle(d.getPKI))
	r.Post(PathPKIRotate, httpapi.Handle(d.rotatePKI))
	r.Post(PathReseal, httpapi.Handle(d.reseal))
	r.Post(PathKubeconfigs, httpapi.Handle(d.issueKubeconfig))
}

// getPKI answers the cluster's api.PKIStatus: certificates and rotation state, never key
// material.
func (d *Daemon) getPKI(w http.ResponseWriter, r *http.Request) error {
	name, err := clusterParam(r)
	if err != nil {
		return err
	}
	p, _, err := d.pki.Get(r.Context(), name)
	if err != nil {
		return notFound(name, err)
	}
	httpapi.WriteJSON(w, http.StatusOK, status(p))
	return nil
}

// rotatePKI records a rotation request; the reconciler renews every leaf and clears it. It
// also starts a rotation of the Secret encryption key unless one is in progress
// (stepKeyRotation).
// It answers 202 with the status showing the pending request.
func (d *Daemon) rotatePKI(w http.ResponseWriter, r *http.Request) error {
	name, err := clusterParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	c, _, err := d.clusters.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(name, err)
	case err != nil:
		return err
	case c.DeletionTimestamp != nil:
		return api.Errorf(api.CodeConflict, "cluster %q is being deleted", name)
	}
	now := time.Now().UTC()
	p, _, err := d.pki.Mutate(ctx, name, false, func(p *api.ClusterPKI) error {
		e := p.SecretEncryption
		startKey := e != nil && len(e.Keys) > 0 && e.Rotation == nil
		if p.RotationRequestedAt != nil && !startKey {
			return store.ErrNoChange // one pending request covers this one
		}
		if p.RotationRequestedAt == nil {
			p.RotationRequestedAt = &now
		}
		if startKey {
			e.Rotation = &api.EncryptionKeyRotation{Phase: api.RotationRequested, RequestedAt: now,
				Message: "a new Secret encryption key is to be added"}
		}
		return nil
	})
	if err != nil {
		return notFound(name, err)
	}
	d.controller.EnqueueContext(ctx, name)
	d.Logger().Info("pki rotation requested", "cluster", name)
	httpapi.WriteJSON(w, http.StatusAccepted, status(p))
	return nil
}

// clusterParam returns the {cluster} path parameter. A name that cannot be a cluster's
// cannot have a PKI either: 404.
func clusterParam(r *http.Request) (string, error) {
	name := chi.URLParam(r, "cluster")
	if _, err := events.Subject(name, events.ResourcePKI, VerbReady); err != nil {
		return "", api.Errorf(api.CodeNotFound, "cluster %q has no PKI", name)
	}
	return name, nil
}

func notFound(name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &api.Error{Code: api.CodeNotFound, Message: "cluster \"" + name + "\" has no PKI", Err: err}
	}
	return err
}
