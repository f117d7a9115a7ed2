package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/services/localcloud"
)

// AnnotationTerminatingNotice on a Cluster API Machine is the id of the inbound
// machine.terminating event infrad deleted the Machine for (docs/inbound-events.md).
const AnnotationTerminatingNotice = "hostplane.dev/terminating-notice"

// What infrad's HTTP API and inbox ask of the machines. Failures of the management cluster
// or the local cloud are returned wrapped; the callers map them to their answers.

// Machines lists the cluster's Cluster API Machines joined with what the local cloud reports
// of each, sorted by name. A local cloud that does not answer is logged (with the request's
// logger, httpapi.LoggerFrom) and said in each machine's message; a management cluster that
// does not serve Machines yet has none.
func (p *Provider) Machines(ctx context.Context, cluster string) ([]api.Machine, error) {
	var machines clusterv1.MachineList
	err := p.reader.List(ctx, &machines, client.InNamespace(api.ControlPlaneNamespace(cluster)))
	if err != nil && !kube.IsNotFound(err) {
		return nil, fmt.Errorf("list the machines of %s: %w", cluster, err)
	}
	cloud := map[string]*localcloud.MachineStatus{}
	cloudMsg := ""
	platform, err := p.clusterPlatform(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if backend := p.CloudFor(platform); backend != nil && len(machines.Items) > 0 {
		list, err := backend.List(ctx, cluster)
		if err != nil {
			p.metrics.cloudErrors.WithLabelValues("list").Inc()
			httpapi.LoggerFrom(ctx).Warn("list the cluster's machines in the local cloud", "cluster", cluster, "err", err)
			cloudMsg = "the local cloud did not answer"
		}
		for i := range list {
			cloud[list[i].Name] = &list[i]
		}
	}
	out := []api.Machine{}
	for i := range machines.Items {
		m := &machines.Items[i]
		v := machineView(cluster, m, cloud[m.Name])
		v.Platform = platform
		v.Message = cmp.Or(v.Message, cloudMsg)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Fault has the local cloud inject fault into the cluster's machine called name and publishes
// machine.faulted; it returns the machine. Errors: ErrNoCloud, ErrMachineNotFound,
// ErrUnknownFault, or the local cloud's failure.
func (p *Provider) Fault(ctx context.Context, cluster, name, fault string) (api.Machine, error) {
	platform, err := p.clusterPlatform(ctx, cluster)
	if err != nil {
		return api.Machine{}, err
	}
	backend := p.CloudFor(platform)
	if backend == nil {
		return api.Machine{}, ErrNoCloud
	}
	st, err := backend.Fault(ctx, cluster, name, fault)
	switch {
	case errors.Is(err, localcloud.ErrNotFound):
		return api.Machine{}, fmt.Errorf("%w: %w", ErrMachineNotFound, err)
	case errors.Is(err, localcloud.ErrUnknownFault), errors.Is(err, errors.ErrUnsupported):
		return api.Machine{}, fmt.Errorf("%w: %w", ErrUnknownFault, err)
	case err != nil:
		p.metrics.cloudErrors.WithLabelValues("fault").Inc()
		return api.Machine{}, fmt.Errorf("%s: fault %s/%s: %w", cloudName(platform), cluster, name, err)
	}
	v := machineView(cluster, p.machine(ctx, cluster, name), &st)
	v.Platform = platform
	if sent, err := p.outbox.Record(ctx, cluster, events.ResourceMachine, events.VerbMachineFaulted, cluster+"/"+name, v); err != nil {
		httpapi.LoggerFrom(ctx).Warn("record machine.faulted", "cluster", cluster, "machine", name, "err", err)
	} else {
		p.outbox.Send(ctx, sent) // the fault is injected already
	}
	return v, nil
}

// machine returns the cluster's Cluster API Machine called name, or nil.
func (p *Provider) machine(ctx context.Context, cluster, name string) *clusterv1.Machine {
	m := &clusterv1.Machine{}
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: name}, m); err != nil {
		return nil
	}
	return m
}

// Terminate answers a termination notice (event id) for the cluster's Cluster API Machine
// called machine: it annotates the Machine with id (AnnotationTerminatingNotice), then deletes
// it, so Cluster API drains its node and its MachineSet replaces it. A Machine already being
// deleted is left to that deletion; one that does not exist is ErrMachineNotFound. notBefore
// is only logged.
func (p *Provider) Terminate(ctx context.Context, cluster, machine, notBefore, id string) error {
	key := types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: machine}
	m := &clusterv1.Machine{}
	err := p.reader.Get(ctx, key, m)
	if err != nil && kube.IsNotFound(err) {
		return fmt.Errorf("%w: cluster %s has no machine %q", ErrMachineNotFound, cluster, machine)
	}
	if err != nil {
		return fmt.Errorf("get Machine %s: %w", key, err)
	}
	log := p.log.With("cluster", cluster, "nodepool", m.Labels[api.LabelNodePool], "machine", m.Name, "event", id)
	if m.DeletionTimestamp != nil {
		log.Info("machine.terminating: the Machine is already being deleted", "notBefore", notBefore)
		return nil
	}
	if m.Annotations[AnnotationTerminatingNotice] != id {
		before := m.DeepCopy()
		setAnnotation(m, AnnotationTerminatingNotice, id)
		if err := p.client.Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%w: cluster %s has no machine %q", ErrMachineNotFound, cluster, machine)
			}
			return fmt.Errorf("annotate Machine %s: %w", key, err)
		}
	}
	err = p.client.Delete(ctx, m, client.Preconditions{UID: &m.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Machine %s: %w", key, err)
	}
	log.Info("machine.terminating: deleted the Machine; Cluster API drains it and its MachineSet replaces it", "notBefore", notBefore)
	return nil
}
