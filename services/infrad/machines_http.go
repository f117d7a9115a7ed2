package infrad

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/localcloud"
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
// joined with what the local cloud reports of each, sorted by name. Without a management
// cluster there are none.
func (d *Daemon) listMachines(w http.ResponseWriter, r *http.Request) error {
	if _, err := d.Runtime(); err != nil {
		return err
	}
	c, err := d.cluster(r)
	if err != nil {
		return err
	}
	out := api.MachineList{Items: []api.Machine{}}
	p := d.provider
	if p == nil {
		httpapi.WriteJSON(w, http.StatusOK, out)
		return nil
	}
	ctx := r.Context()
	var machines clusterv1.MachineList
	err = p.reader.List(ctx, &machines, client.InNamespace(api.ControlPlaneNamespace(c.Name)))
	if err != nil && !noMatch(err) {
		return &api.Error{Code: api.CodeUnavailable, Message: "the management cluster did not list the machines; retry shortly", Err: err}
	}
	cloud := map[string]*localcloud.MachineStatus{}
	cloudMsg := ""
	if p.cloud != nil && len(machines.Items) > 0 {
		list, err := p.cloud.List(ctx, c.Name)
		if err != nil {
			d.metrics.cloudErrors.WithLabelValues("list").Inc()
			httpapi.LoggerFrom(ctx).Warn("list the cluster's machines in the local cloud", "cluster", c.Name, "err", err)
			cloudMsg = "the local cloud did not answer"
		}
		for i := range list {
			cloud[list[i].Name] = &list[i]
		}
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		v := machineView(c.Name, m, cloud[m.Name])
		v.Message = cmp.Or(v.Message, cloudMsg)
		out.Items = append(out.Items, v)
	}
	slices.SortFunc(out.Items, func(a, b api.Machine) int { return strings.Compare(a.Name, b.Name) })
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// faultMachine answers POST /v1/clusters/{cluster}/machines/{machine}/fault: the local cloud
// injects the fault and infrad publishes machine.faulted; 202 with the machine.
func (d *Daemon) faultMachine(w http.ResponseWriter, r *http.Request) error {
	if _, err := d.Runtime(); err != nil {
		return err
	}
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
	if c.Spec.Platform.Type == api.PlatformNone {
		return api.Errorf(api.CodeConflict, "cluster %q is on platform %q: its machines are not hostplane's to fault", c.Name, api.PlatformNone)
	}
	p := d.provider
	if p == nil || p.cloud == nil {
		return api.Errorf(api.CodeConflict, "infrad runs no local cloud (HOSTPLANE_MANAGEMENT_KUBECONFIG and HOSTPLANE_LOCALCLOUD_URL): cluster %q has no machines to fault", c.Name)
	}
	name := chi.URLParam(r, "machine")
	ctx := r.Context()
	st, err := p.cloud.Fault(ctx, c.Name, name, in.Type)
	switch {
	case errors.Is(err, localcloud.ErrNotFound):
		return api.Errorf(api.CodeNotFound, "cluster %q has no machine %q", c.Name, name)
	case errors.Is(err, localcloud.ErrUnknownFault):
		var fe api.FieldErrors
		fe.Add("type", "the local cloud does not know the fault %q", in.Type)
		return fe.Err()
	case err != nil:
		d.metrics.cloudErrors.WithLabelValues("fault").Inc()
		return &api.Error{Code: api.CodeUnavailable, Message: "the local cloud did not inject the fault; retry shortly", Err: err}
	}
	v := machineView(c.Name, p.machine(ctx, c.Name, name), &st)
	if sent, err := d.outbox.Record(ctx, c.Name, events.ResourceMachine, events.VerbMachineFaulted, c.Name+"/"+name, v); err != nil {
		httpapi.LoggerFrom(ctx).Warn("record machine.faulted", "cluster", c.Name, "machine", name, "err", err)
	} else {
		d.outbox.Send(ctx, sent) // the fault is injected already
	}
	httpapi.LoggerFrom(ctx).Info("injected a machine fault", "cluster", c.Name, "machine", name, "fault", in.Type)
	httpapi.WriteJSON(w, http.StatusAccepted, v)
	return nil
}

// machine returns the cluster's Cluster API Machine called name, or nil.
func (p *provider) machine(ctx context.Context, cluster, name string) *clusterv1.Machine {
	m := &clusterv1.Machine{}
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: name}, m); err != nil {
		return nil
	}
	return m
}

// noMatch reports an error that says the management cluster does not serve Machines (Cluster
// API's CRDs are not installed yet): there are none.
func noMatch(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}
