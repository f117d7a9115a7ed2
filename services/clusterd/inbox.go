package clusterd

import (
	"context"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
)

// InboxConsumer is the durable consumer of the inbound events clusterd owns. clusterd also
// runs the inbox front desk: it answers inbound types nobody handles (unknown, or whose
// owner is not built yet).
var InboxConsumer = daemon.InboxConsumer(Name)

// newInbox builds clusterd's inbox consumer: cluster.upgrade, plus the front desk.
func (d *Daemon) newInbox(ctx context.Context, rt *daemon.Runtime) (*inbox.Consumer, error) {
	return rt.Inbox(ctx, map[string]inbox.Handler{
		events.InboundClusterUpgrade:   d.inboundUpgrade,
		events.InboundClusterHibernate: d.inboundHibernate,
	}, true)
}

// inboundUpgrade applies cluster.upgrade ({"version": "x.y.z"}) exactly as
// PATCH /v1/clusters/{cluster} with {"release":{"version":...}} does.
func (d *Daemon) inboundUpgrade(ctx context.Context, cluster string, ev events.Event) error {
	var data struct {
		Version string `json:"version"`
	}
	if err := ev.DecodeData(&data); err != nil {
		return inbox.Rejectf("%v", err)
	}
	_, err := d.updateSpec(ctx, cluster, api.HibernationReasonRequested, func(spec api.ClusterSpec) (api.ClusterSpec, error) {
		spec.Release.Version = data.Version
		return spec, nil
	})
	return inboundResult(cluster, "upgrade", err)
}

// inboundHibernate applies cluster.hibernate ({"enabled": bool}) exactly as
// PATCH /v1/clusters/{cluster} with {"hibernation":{"enabled":...}} does.
func (d *Daemon) inboundHibernate(ctx context.Context, cluster string, ev events.Event) error {
	var data struct {
		Enabled bool `json:"enabled"`
	}
	if err := ev.DecodeData(&data); err != nil {
		return inbox.Rejectf("%v", err)
	}
	_, err := d.setHibernation(ctx, cluster, data.Enabled, api.HibernationReasonRequested)
	return inboundResult(cluster, "hibernate", err)
}

// inboundResult is the inbox's answer to the inbound change what (upgrade, hibernate) of
// cluster.
func inboundResult(cluster, what string, err error) error {
	return daemon.InboundResult(err, "cluster "+cluster+" does not exist", what+" cluster "+cluster)
}
