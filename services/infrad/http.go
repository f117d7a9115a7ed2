package infrad

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
)

func (d *Daemon) routes(r chi.Router) {
	r = r.With(d.Started)
	r.Get("/v1/clusters/{cluster}/infra", httpapi.Handle(d.getInfra))
	r.Get("/v1/clusters/{cluster}/machines", httpapi.Handle(d.listMachines))
	r.Post("/v1/clusters/{cluster}/machines/{machine}/fault", httpapi.Handle(d.faultMachine))
	r.Get("/v1/platforms/local/instancetypes", httpapi.Handle(d.listInstanceTypes))
}

// listInstanceTypes answers GET /v1/platforms/local/instancetypes with the local platform's
// catalogue (api.LocalInstanceTypes, the one the local cloud serves too). It needs no
// cluster, management cluster or local cloud; like every route it answers once infrad runs.
func (d *Daemon) listInstanceTypes(w http.ResponseWriter, _ *http.Request) error {
	httpapi.WriteJSON(w, http.StatusOK, api.InstanceTypeList{Items: api.LocalInstanceTypes()})
	return nil
}

// getInfra answers GET /v1/clusters/{cluster}/infra with the cluster's api.Infra.
func (d *Daemon) getInfra(w http.ResponseWriter, r *http.Request) error {
	cluster := chi.URLParam(r, "cluster")
	if len(validation.IsDNS1123Label(cluster)) > 0 { // not a cluster name: cannot have a record
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
