package infrad

import (
	"errors"
	"net/http"
	"regexp"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
)

// clusterNameRE is what a cluster name looks like; anything else cannot have a record.
var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (d *Daemon) routes(r chi.Router) {
	r.Get("/v1/clusters/{cluster}/infra", httpapi.Handle(d.getInfra))
	r.Get("/v1/clusters/{cluster}/machines", httpapi.Handle(d.listMachines))
	r.Post("/v1/clusters/{cluster}/machines/{machine}/fault", httpapi.Handle(d.faultMachine))
}

// getInfra answers GET /v1/clusters/{cluster}/infra with the cluster's api.Infra.
func (d *Daemon) getInfra(w http.ResponseWriter, r *http.Request) error {
	if _, err := d.Runtime(); err != nil {
		return err
	}
	cluster := chi.URLParam(r, "cluster")
	if !clusterNameRE.MatchString(cluster) {
		return api.Errorf(api.CodeNotFound, "cluster %q has no infrastructure", cluster)
	}
	inf, _, err := d.infra.Get(r.Context(), cluster)
	if errors.Is(err, store.ErrNotFound) {
		return api.Errorf(api.CodeNotFound, "cluster %q has no infrastructure", cluster)
	}
	if err != nil {
		return &api.Error{Code: api.CodeInternal, Message: "reading the infra record failed", Err: err}
	}
	httpapi.WriteJSON(w, http.StatusOK, inf)
	return nil
}
