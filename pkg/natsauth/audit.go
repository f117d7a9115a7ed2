package natsauth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/events"
)

// ConsumerAuditor deletes every push consumer of HOSTPLANE_EVENTS. Subject permissions cannot
// see a JetStream request's body, so an identity that may create its consumer there may also
// give it a deliver subject outside its own permissions, and the server would deliver the
// events there. No hostplane client makes a push consumer on that stream (daemons and event
// consumers pull, the event streams of the API are pull-based ordered consumers), so any push
// consumer is deleted: at once when its creation is advised, and at start for those made
// while no auditor ran. It is a daemon.Runnable.
type ConsumerAuditor struct {
	NC *nats.Conn
	JS jetstream.JetStream
	// Log says what was deleted; Deleted, when set, counts it.
	Log     *slog.Logger
	Deleted prometheus.Counter
}

// auditTimeout bounds one consumer's look-up and delete.
const auditTimeout = 10 * time.Second

// Start audits until ctx ends.
func (a *ConsumerAuditor) Start(ctx context.Context) error {
	stream := events.EventsStream
	names := make(chan string, 256)
	sub, err := a.NC.Subscribe(AdvisoryConsumerCreated(stream)+".>", func(m *nats.Msg) {
		name := strings.TrimPrefix(m.Subject, AdvisoryConsumerCreated(stream)+".")
		select {
		case names <- name:
		default:
			a.Log.Warn("consumer auditor: too many consumers created at once; the next sweep covers this one", "consumer", name)
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	a.sweep(ctx, stream)
	sweep := time.NewTicker(5 * time.Minute) // advisories are not durable: catch what was missed
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case name := <-names:
			a.check(ctx, stream, name)
		case <-sweep.C:
			a.sweep(ctx, stream)
		}
	}
}

// sweep checks every consumer of stream.
func (a *ConsumerAuditor) sweep(ctx context.Context, stream string) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	s, err := a.JS.Stream(ctx, stream)
	if err != nil {
		a.Log.Warn("consumer auditor: stream", "stream", stream, "err", err)
		return
	}
	l := s.ListConsumers(ctx)
	for info := range l.Info() {
		if info.Config.DeliverSubject != "" {
			a.remove(ctx, stream, info.Name, info.Config.DeliverSubject)
		}
	}
	if err := l.Err(); err != nil && !errors.Is(err, context.Canceled) {
		a.Log.Warn("consumer auditor: list consumers", "stream", stream, "err", err)
	}
}

// check looks consumer name of stream up (through the API: the client library refuses to
// open a push consumer) and deletes it if it is a push consumer.
func (a *ConsumerAuditor) check(ctx context.Context, stream, name string) {
	if daemonDurable(name) {
		return // a daemon's own pull consumer: no one else may make one of its names
	}
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	msg, err := a.NC.RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+stream+"."+name, nil)
	if err != nil {
		a.Log.Warn("consumer auditor: consumer info", "consumer", name, "err", err)
		return
	}
	var info struct {
		Config struct {
			DeliverSubject string `json:"deliver_subject"`
		} `json:"config"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		a.Log.Warn("consumer auditor: consumer info", "consumer", name, "err", err)
		return
	}
	if info.Config.DeliverSubject != "" {
		a.remove(ctx, stream, name, info.Config.DeliverSubject)
	}
}

// daemonDurable reports whether name is a daemon's durable consumer of HOSTPLANE_EVENTS
// (the table's Consumers), which the auditor may not look up.
func daemonDurable(name string) bool {
	for _, d := range Daemons {
		if slices.Contains(d.Consumers, name) {
			return true
		}
	}
	return false
}

func (a *ConsumerAuditor) remove(ctx context.Context, stream, name, deliver string) {
	if err := a.JS.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		a.Log.Warn("consumer auditor: delete a push consumer", "consumer", name, "deliver_subject", deliver, "err", err)
		return
	}
	if a.Deleted != nil {
		a.Deleted.Inc()
	}
	a.Log.Warn("deleted a push consumer of the events stream: only pull consumers may read it (a push consumer delivers wherever its creator said, past its permissions)",
		"stream", stream, "consumer", name, "deliver_subject", deliver)
}
