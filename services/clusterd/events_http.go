package clusterd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// PathEvents is the Server-Sent Events stream of one cluster's events.
const PathEvents = "/v1/clusters/{cluster}/events"

// ContentTypeEventStream is the media type of PathEvents.
const ContentTypeEventStream = "text/event-stream"

// EventsHeartbeat is how often an idle event stream sends a comment line, so proxies keep it
// open and clients notice a dead connection.
const EventsHeartbeat = 15 * time.Second

// EventsWriteTimeout bounds each write to an event stream: a client that reads nothing for
// that long (gone without closing, or too slow) loses its stream, and its slot.
const EventsWriteTimeout = 30 * time.Second

// DefaultEventStreamsPerCaller is Config.EventStreamsPerCaller's default.
const DefaultEventStreamsPerCaller = 8

// holdStream counts an event stream for the request's caller (its token's name, else its
// address), or refuses it when the caller holds as many as it may; release gives it back.
func (d *Daemon) holdStream(r *http.Request) (release func(), err error) {
	caller := "address " + r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		caller = "address " + host
	}
	if p, ok := auth.FromContext(r.Context()); ok {
		caller = "token " + p.Name
	}
	d.streamsMu.Lock()
	defer d.streamsMu.Unlock()
	if d.streams[caller] >= d.cfg.EventStreamsPerCaller {
		return nil, api.Errorf(api.CodeTooMany, "%s holds %d event streams open already, as many as a caller may; close one first", caller, d.streams[caller])
	}
	d.streams[caller]++
	return func() {
		d.streamsMu.Lock()
		defer d.streamsMu.Unlock()
		if d.streams[caller]--; d.streams[caller] <= 0 {
			delete(d.streams, caller)
		}
	}, nil
}

// streamEvents answers GET /v1/clusters/{cluster}/events with every CloudEvent published on
// hostplane.evt.<cluster>.> as Server-Sent Events:
//
//	id: <event id>
//	event: <event type, io.hostplane.<resource>.<verb>>
//	data: <the CloudEvent, JSON on one line>
//
// It starts with the events published after the request, or with those published at or
// after ?since=<RFC 3339 time> (replayed from the HOSTPLANE_EVENTS stream). A comment line
// is sent every EventsHeartbeat. The stream ends when the client goes away or the server
// shuts down. A name no cluster has yet streams nothing until one is created, so a client
// can follow a cluster from its creation.
//
// Each stream is an ephemeral ordered JetStream consumer filtered to the cluster.
func (d *Daemon) streamEvents(w http.ResponseWriter, r *http.Request) error {
	rt, err := d.Runtime()
	if err != nil {
		return err
	}
	name := chi.URLParam(r, "cluster")
	if api.ValidateClusterName(name) != nil {
		return notFound(name)
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.ClusterEventsFilter(name)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	if s := r.URL.Query().Get("since"); s != "" {
		since, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return &api.Error{Code: api.CodeInvalid, Message: "invalid query",
				Fields: []api.FieldError{{Field: "since", Detail: "must be an RFC 3339 time, such as 2026-01-02T15:04:05Z"}}}
		}
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	release, err := d.holdStream(r)
	if err != nil {
		return err
	}
	defer release()
	ctx := r.Context()
	cons, err := rt.JS.OrderedConsumer(ctx, events.EventsStream, cfg)
	if err != nil {
		return fmt.Errorf("event stream of %s: ordered consumer: %w", name, err)
	}
	msgs := make(chan jetstream.Msg)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return fmt.Errorf("event stream of %s: consume: %w", name, err)
	}
	defer cc.Stop()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", ContentTypeEventStream)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer the stream
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// The consumer exists: from now on no event of the cluster is missed. Say so at once.
	if err := writeFlush(w, rc, ": events of cluster "+name+"\n\n"); err != nil {
		return nil // the client went away
	}

	log := d.clusterLog(name)
	heartbeat := time.NewTicker(EventsHeartbeat)
	defer heartbeat.Stop()
	for {
		var frame string
		select {
		case <-ctx.Done():
			return nil
		case <-httpapi.Closing(ctx):
			return nil
		case <-cc.Closed():
			log.DebugContext(ctx, "event stream consumer closed")
			return nil
		case <-heartbeat.C:
			frame = ": heartbeat\n\n"
		case m := <-msgs:
			f, err := sseFrame(m.Data())
			if err != nil {
				log.WarnContext(ctx, "skipping a malformed event in the stream", "subject", m.Subject(), "err", err)
				continue
			}
			frame = f
		}
		if err := writeFlush(w, rc, frame); err != nil {
			return nil
		}
	}
}

// sseFrame renders a stored CloudEvent as one Server-Sent Event.
func sseFrame(data []byte) (string, error) {
	ev, err := events.Decode(data)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(ev.ID+ev.Type, "\r\n") {
		return "", fmt.Errorf("%w: a line break in id or type", events.ErrBadEvent)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, data); err != nil {
		return "", err
	}
	return "id: " + ev.ID + "\nevent: " + ev.Type + "\ndata: " + line.String() + "\n\n", nil
}

func writeFlush(w http.ResponseWriter, rc *http.ResponseController, s string) error {
	if err := rc.SetWriteDeadline(time.Now().Add(EventsWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := w.Write([]byte(s)); err != nil {
		return err
	}
	return rc.Flush()
}
