package daemon

import (
	"context"

	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
)

// InboxConsumer is the name of daemon name's inbox consumer: "<name>-inbox".
func InboxConsumer(name string) string { return name + "-inbox" }

// Inbox builds the daemon's consumer of the inbound events it owns (handlers, by inbound
// type): applied once per event id (its dedup bucket), traced and counted, and a rejected
// event answered on hostplane.evt.<cluster>.inbox.rejected. frontDesk also answers the
// types nobody handles (one daemon does: clusterd). The consumer is a Runnable.
func (rt *Runtime) Inbox(ctx context.Context, handlers map[string]inbox.Handler, frontDesk bool) (*inbox.Consumer, error) {
	dedup, err := inbox.EnsureDedupBucket(ctx, rt.JS, rt.Name, 0)
	if err != nil {
		return nil, err
	}
	rejections := inbox.NewRejectionPublisher(rt.JS, rt.Name)
	return inbox.New(rt.JS, inbox.Config{
		Name:      InboxConsumer(rt.Name),
		Handlers:  handlers,
		FrontDesk: frontDesk,
		Dedup:     dedup,
		Reject: func(ctx context.Context, cluster string, r inbox.Rejection) error {
			_, err := rejections.Publish(ctx, cluster, events.ResourceInbox, events.VerbInboxRejected, cluster, r)
			return err
		},
		Registry:       rt.Registry,
		Log:            rt.Log,
		TracerProvider: rt.TracerProvider,
	})
}
