package infrad

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/infrad/provider"
)

// faults are the fault types POST .../fault accepts.
var faults = []string{api.FaultStopHeartbeats, api.FaultCrash, api.FaultFailNextBoot}

// cluster reads the {cluster} of a request's path: an unknown cluster is a 404.
func (d *Daemon) cluster(r *http.Request) (*api.Cluster, error) {
	name := chi.URLParam(r, "cluster")
	if len(validation.IsDNS1123Label(name)) > 0 {
		return nil, api.Errorf(api.CodeNotFound, "cluster %q does not exist", name)
	}
	c, _, err := d.clusters.Get(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.CodeNotFound, "cluster %q does not exist", name)
	}
	if err != nil {
		return nil, &api.Error{Code: api.CodeInternal, Message: "reading the cluster failed", Err: err}
	}
	if c.Name == "" {
		c.Name = name
	}
	return c, nil
}

// listMachines answers GET /v1/clusters/{cluster}/machines: the cluster's Cluster API Machines
// joined with what the local cloud reports of each, sorted by name (provider.Machines).
// Without a management cluster there are none.
func (d *Daemon) listMachines(w http.ResponseWriter, r *http.Request) error {
	c, err := d.cluster(r)
	if err != nil {
		return err
	}
	out := api.MachineList{Items: []api.Machine{}}
	if p := d.provider; p != nil {
		if out.Items, err = p.Machines(r.Context(), c.Name); err != nil {
			return &api.Error{Code: api.CodeUnavailable, Message: "the management cluster did not list the machines; retry shortly", Err: err}
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// faultMachine answers POST /v1/clusters/{cluster}/machines/{machine}/fault: the local cloud
// injects the fault and infrad publishes machine.faulted (provider.Fault); 202 with the
// machine.
func (d *Daemon) faultMachine(w http.ResponseWriter, r *http.Request) error {
	c, err := d.cluster(r)
	if err != nil {
		return err
	}
	var in api.MachineFault
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if !slices.Contains(faults, in.Type) {
		var fe api.FieldErrors
		fe.Add("type", "%q is not a fault; use one of %s", in.Type, strings.Join(faults, ", "))
		return fe.Err()
	}
	if !api.ProvidesMachines(c.Spec.Platform.Type) {
		return api.Errorf(api.CodeConflict, "cluster %q is on platform %q: its machines are not hostplane's to fault", c.Name, c.Spec.Platform.Type)
	}
	name := chi.URLParam(r, "machine")
	ctx := r.Context()
	var m api.Machine
	err = provider.ErrNoCloud // without a management cluster
	if p := d.provider; p != nil {
		m, err = p.Fault(ctx, c.Name, name, in.Type)
	}
	switch {
	case errors.Is(err, provider.ErrNoCloud):
		return api.Errorf(api.CodeConflict, "infrad runs no local cloud (HOSTPLANE_MANAGEMENT_KUBECONFIG and HOSTPLANE_LOCALCLOUD_URL): cluster %q has no machines to fault", c.Name)
	case errors.Is(err, provider.ErrMachineNotFound):
		return api.Errorf(api.CodeNotFound, "cluster %q has no machine %q", c.Name, name)
	case errors.Is(err, provider.ErrUnknownFault):
		var fe api.FieldErrors
		if errors.Is(err, errors.ErrUnsupported) {
			fe.Add("type", "the %s machines of cluster %q do not support the fault %q", c.Spec.Platform.Type, c.Name, in.Type)
		} else {
			fe.Add("type", "the local cloud does not know the fault %q", in.Type)
		}
		return fe.Err()
	case err != nil:
		return &api.Error{Code: api.CodeUnavailable, Message: "the machine's cloud did not inject the fault; retry shortly", Err: err}
	}
	httpapi.LoggerFrom(ctx).Info("injected a machine fault", "cluster", c.Name, "machine", name, "fault", in.Type)
	httpapi.WriteJSON(w, http.StatusAccepted, m)
	return nil
}
