package infrad

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
	"github.com/hostplane/hostplane/pkg/store"
)

// InboxConsumer is the durable consumer of the inbound events infrad owns.
const InboxConsumer = Name + "-inbox"

// newInbox builds infrad's inbox consumer: machine.terminating. It runs with or without a
// management cluster, so a notice is always answered (without one it is rejected).
func (d *Daemon) newInbox(ctx context.Context, rt *daemon.Runtime) (*inbox.Consumer, error) {
	dedup, err := inbox.EnsureDedupBucket(ctx, rt.JS, Name, 0)
	if err != nil {
		return nil, err
	}
	d.rejections = inbox.NewRejectionPublisher(rt.JS, Name)
	return inbox.New(rt.JS, inbox.Config{
		Name:           InboxConsumer,
		Handlers:       map[string]inbox.Handler{events.InboundMachineTerminating: d.inboundTerminating},
		Dedup:          dedup,
		Reject:         d.rejectInbound,
		Registry:       rt.Registry,
		Log:            rt.Log,
		TracerProvider: rt.TracerProvider,
	})
}

// rejectInbound answers an inbound event that was not applied on
// hostplane.evt.<cluster>.inbox.rejected.
func (d *Daemon) rejectInbound(ctx context.Context, cluster string, r inbox.Rejection) error {
	_, err := d.rejections.Publish(ctx, cluster, events.ResourceInbox, events.VerbInboxRejected, cluster, r)
	return err
}

// terminatingNotice is the data of machine.terminating.
type terminatingNotice struct {
	Machine   string `json:"machine"`
	NotBefore string `json:"notBefore,omitempty"`
}

// inboundTerminating applies machine.terminating ({"machine": "workers-7f9c2"}): the cluster's
// Cluster API Machine of that name is annotated with the event id
// (AnnotationTerminatingNotice) and deleted at once, whatever notBefore says. Cluster API then
// cordons and drains its node (evictions honour PodDisruptionBudgets, bounded by the pool's
// nodeDrainTimeout) and the Machine's MachineSet, one short, creates the replacement;
// machine.deleted follows when the LocalMachine's cloud machine is gone. An unknown cluster or
// machine is rejected; a Machine already being deleted is left to that deletion.
func (d *Daemon) inboundTerminating(ctx context.Context, cluster string, ev events.Event) error {
	var data terminatingNotice
	if err := ev.DecodeData(&data); err != nil {
		return inbox.Rejectf("%v", err)
	}
	if _, _, err := d.clusters.Get(ctx, cluster); errors.Is(err, store.ErrNotFound) {
		return inbox.Rejectf("cluster %s does not exist", cluster)
	} else if err != nil {
		return fmt.Errorf("read cluster %s: %w", cluster, err)
	}
	p := d.provider
	if p == nil {
		return inbox.Rejectf("infrad runs no management cluster (HOSTPLANE_MANAGEMENT_KUBECONFIG): cluster %s has no machine %q", cluster, data.Machine)
	}
	if err := p.ready(); err != nil {
		return err // retried once the provider started
	}
	return p.terminate(ctx, cluster, data, ev.ID)
}

// terminate annotates the cluster's Machine with the notice's event id, then deletes it.
func (p *provider) terminate(ctx context.Context, cluster string, data terminatingNotice, id string) error {
	key := types.NamespacedName{Namespace: api.ControlPlaneNamespace(cluster), Name: data.Machine}
	m := &clusterv1.Machine{}
	err := p.reader.Get(ctx, key, m)
	if err != nil && noMatch(err) {
		return inbox.Rejectf("cluster %s has no machine %q", cluster, data.Machine)
	}
	if err != nil {
		return fmt.Errorf("get Machine %s: %w", key, err)
	}
	log := p.log.With("cluster", cluster, "nodepool", m.Labels[api.LabelNodePool], "machine", m.Name, "event", id)
	if m.DeletionTimestamp != nil {
		log.Info("machine.terminating: the Machine is already being deleted", "notBefore", data.NotBefore)
		return nil
	}
	if m.Annotations[AnnotationTerminatingNotice] != id {
		before := m.DeepCopy()
		setAnnotation(m, AnnotationTerminatingNotice, id)
		if err := p.client.Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return inbox.Rejectf("cluster %s has no machine %q", cluster, data.Machine)
			}
			return fmt.Errorf("annotate Machine %s: %w", key, err)
		}
	}
	err = p.client.Delete(ctx, m, client.Preconditions{UID: &m.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Machine %s: %w", key, err)
	}
	log.Info("machine.terminating: deleted the Machine; Cluster API drains it and its MachineSet replaces it", "notBefore", data.NotBefore)
	return nil
}
