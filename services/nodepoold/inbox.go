package nodepoold

import (
	"context"
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
)

// InboxConsumer is the durable consumer of the inbound events nodepoold owns.
var InboxConsumer = daemon.InboxConsumer(Name)

// newInbox builds nodepoold's inbox consumer: nodepool.scale.
func (d *Daemon) newInbox(ctx context.Context, rt *daemon.Runtime) (*inbox.Consumer, error) {
	return rt.Inbox(ctx, map[string]inbox.Handler{events.InboundNodePoolScale: d.inboundScale}, false)
}

// inboundScale applies nodepool.scale ({"nodePool": "workers", "replicas": 3}) exactly as
// PATCH /v1/clusters/{cluster}/nodepools/{nodePool} with {"replicas": 3} does: an autoscaled
// pool refuses it (replicas and autoScaling are mutually exclusive), as does a pool or
// cluster being deleted.
func (d *Daemon) inboundScale(ctx context.Context, cluster string, ev events.Event) error {
	var data struct {
		NodePool string `json:"nodePool"`
		Replicas int32  `json:"replicas"`
	}
	if err := ev.DecodeData(&data); err != nil {
		return inbox.Rejectf("%v", err)
	}
	if err := refuseAutoNode(cluster, data.NodePool); err != nil {
		return inbox.Rejectf("%v", err)
	}
	_, err := d.updateSpec(ctx, cluster, data.NodePool, func(spec api.NodePoolSpec) (api.NodePoolSpec, error) {
		spec.Replicas = &data.Replicas
		return spec, nil
	})
	return daemon.InboundResult(err, "", fmt.Sprintf("scale node pool %s/%s", cluster, data.NodePool))
}
