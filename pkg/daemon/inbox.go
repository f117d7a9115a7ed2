package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
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

// InboundResult turns the outcome of an inbound change made as the API makes it into the
// inbox's answer: the caller's mistakes are rejections (a missing resource's says notFound,
// or the error's own message when it is ""); any other error is retried, wrapped in what.
func InboundResult(err error, notFound, what string) error {
	if ae, ok := errors.AsType[*api.Error](err); ok {
		switch ae.Code {
		case api.CodeNotFound:
			return inbox.Rejectf("%s", cmp.Or(notFound, ae.Message))
		case api.CodeInvalid, api.CodeConflict:
			return inbox.Rejectf("%s", ae.Error())
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
