package infrad

import (
	"context"
	"errors"
	"fmt"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/infrad/provider"
)

// InboxConsumer is the durable consumer of the inbound events infrad owns.
var InboxConsumer = daemon.InboxConsumer(Name)

// newInbox builds infrad's inbox consumer: machine.terminating. It runs with or without a
// management cluster, so a notice is always answered (without one it is rejected).
func (d *Daemon) newInbox(ctx context.Context, rt *daemon.Runtime) (*inbox.Consumer, error) {
	return rt.Inbox(ctx, map[string]inbox.Handler{events.InboundMachineTerminating: d.inboundTerminating}, false)
}

// terminatingNotice is the data of machine.terminating.
type terminatingNotice struct {
	Machine   string `json:"machine"`
	NotBefore string `json:"notBefore,omitempty"`
}

// inboundTerminating applies machine.terminating ({"machine": "workers-7f9c2"}): the cluster's
// Cluster API Machine of that name is annotated with the event id
// (provider.AnnotationTerminatingNotice) and deleted at once, whatever notBefore says. Cluster
// API then cordons and drains its node (evictions honour PodDisruptionBudgets, bounded by the pool's
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
	if err := p.Ready(); err != nil {
		return err // retried once the provider started
	}
	err := p.Terminate(ctx, cluster, data.Machine, data.NotBefore, ev.ID)
	if errors.Is(err, provider.ErrMachineNotFound) {
		return inbox.Rejectf("cluster %s has no machine %q", cluster, data.Machine)
	}
	return err
}
