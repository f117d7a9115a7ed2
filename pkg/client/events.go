package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/events"
)

// StreamEvent is one Server-Sent Event of a cluster's event stream.
type StreamEvent struct {
	// ID is the SSE id, sent back as Last-Event-ID to resume after it.
	ID string
	// Name is the SSE event name ("message" when the server sends none).
	Name string
	// Data is the event's data: a CloudEvent in structured JSON mode.
	Data []byte
	// Event is Data decoded; zero when Data is not a CloudEvent.
	Event events.Event
}

// StreamOptions select where a stream starts.
type StreamOptions struct {
	// Since asks for the events after that time (sent as ?since=<RFC 3339>); zero: only new ones.
	Since time.Time
	// LastEventID resumes after that event (the Last-Event-ID header); it wins over Since.
	LastEventID string
}

// EventStream reads one connection's events.
type EventStream struct {
	body  io.ReadCloser
	r     *bufio.Reader
	retry time.Duration // the server's "retry:" advice, if any
}

// Events opens GET /v1/clusters/{cluster}/events as text/event-stream.
func (c *Client) Events(ctx context.Context, cluster string, opts StreamOptions) (*EventStream, error) {
	path := ClusterPath(cluster, "events")
	if !opts.Since.IsZero() {
		path += "?since=" + url.QueryEscape(opts.Since.UTC().Format(time.RFC3339Nano))
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if opts.LastEventID != "" {
		req.Header.Set("Last-Event-ID", opts.LastEventID)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, answerError(req, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s answered %q, not text/event-stream", path, ct)
	}
	return &EventStream{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

// Next returns the next event; io.EOF when the server ended the stream. Comments
// (keep-alives) are skipped.
func (s *EventStream) Next() (StreamEvent, error) {
	var ev StreamEvent
	var data []string
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				return StreamEvent{}, io.EOF
			}
			if line == "" || !errors.Is(err, io.EOF) {
				return StreamEvent{}, err
			}
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if !seen {
				if err != nil {
					return StreamEvent{}, io.EOF
				}
				continue
			}
			ev.Data = []byte(strings.Join(data, "\n"))
			if ev.Name == "" {
				ev.Name = "message"
			}
			if len(ev.Data) > 0 {
				var ce events.Event
				if json.Unmarshal(ev.Data, &ce) == nil && ce.SpecVersion != "" {
					ev.Event = ce
				}
			}
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID, seen = value, true
		case "event":
			ev.Name, seen = value, true
		case "data":
			data, seen = append(data, value), true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
		if err != nil { // the last line had no newline
			return StreamEvent{}, io.EOF
		}
	}
}

// Close ends the connection.
func (s *EventStream) Close() error { return s.body.Close() }

// FollowOptions tune Follow.
type FollowOptions struct {
	StreamOptions
	// OnDisconnect, when set, is told of each lost connection and how long Follow waits
	// before it reconnects.
	OnDisconnect func(err error, wait time.Duration)
}

// Follow streams the cluster's events to fn until ctx ends (returning nil), fn returns an
// error (returned), or the server answers a request error (4xx, returned). A dropped
// connection or a 5xx is retried with backoff. The new connection resumes after the last
// event seen: it sends Last-Event-ID and asks for the events since that event's time (or
// since the previous connection was made), and events already delivered are skipped by id,
// so each event reaches fn once whether or not the server honours Last-Event-ID.
func (c *Client) Follow(ctx context.Context, cluster string, opts FollowOptions, fn func(StreamEvent) error) error {
	seen := newIDSet(4096)
	last := opts.LastEventID
	since := opts.Since
	// Between connections: 1s doubling to 10s, from 1s again after a connection that
	// delivered events; a retry the server asked for replaces the delay (not the schedule).
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Cap: 10 * time.Second, Steps: math.MaxInt}
	}
	backoff := newBackoff()
	for {
		so := StreamOptions{Since: since, LastEventID: last}
		connectedAt := time.Now()
		s, err := c.Events(ctx, cluster, so)
		var retry time.Duration
		if err == nil {
			got := false
			for {
				ev, rerr := s.Next()
				if rerr != nil {
					err = rerr
					break
				}
				if ev.ID != "" {
					if seen.has(ev.ID) {
						continue
					}
					seen.add(ev.ID)
					last = ev.ID
				}
				got = true
				if !ev.Event.Time.IsZero() {
					since = ev.Event.Time
				}
				if ferr := fn(ev); ferr != nil {
					s.Close()
					return ferr
				}
			}
			s.Close()
			retry = s.retry
			if got {
				backoff = newBackoff()
			} else if since.IsZero() {
				// Nothing seen yet: resume from when this connection started listening.
				since = connectedAt
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if ae, ok := errors.AsType[*Error](err); ok && ae.Status < 500 {
			return err
		}
		delay := backoff.Step()
		if retry > 0 {
			delay = retry
		}
		if opts.OnDisconnect != nil {
			opts.OnDisconnect(err, delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// idSet remembers the last n ids.
type idSet struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newIDSet(n int) *idSet {
	return &idSet{ids: make(map[string]struct{}, n), ring: make([]string, n)}
}

func (s *idSet) has(id string) bool { _, ok := s.ids[id]; return ok }

func (s *idSet) add(id string) {
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.ids[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}
