package clusterd

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/auth/authtest"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// sseEvent is one Server-Sent Event as a client parses it.
type sseEvent struct {
	ID, Event, Data string
}

// openStream GETs path and returns a channel of the events it sends, closed when the stream
// ends. It returns once the answer's headers arrived, that is once the server subscribed.
func (e *env) openStream(path string) (*http.Response, <-chan sseEvent) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan sseEvent)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"): // comment: heartbeat
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "id":
					ev.ID = value
				case "event":
					ev.Event = value
				case "data":
					ev.Data += value
				}
			}
		}
	}()
	return resp, ch
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event on the stream within 30s")
	}
	return sseEvent{}
}

func (e *env) publish(cluster string, res events.Resource, verb string) events.Event {
	e.t.Helper()
	ev, err := e.pub.Publish(context.Background(), cluster, res, verb, cluster, map[string]string{"n": verb})
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// checkFrame asserts the SSE frame carries exactly the published CloudEvent.
func checkFrame(t *testing.T, got sseEvent, want events.Event) {
	t.Helper()
	if got.ID != want.ID || got.Event != want.Type {
		t.Fatalf("frame id/event = %q/%q, want %q/%q", got.ID, got.Event, want.ID, want.Type)
	}
	ev, err := events.Decode([]byte(got.Data))
	if err != nil {
		t.Fatalf("frame data is not a CloudEvent: %v\n%s", err, got.Data)
	}
	if ev.ID != want.ID || ev.Type != want.Type || ev.Subject != want.Subject || string(ev.Data) != string(want.Data) {
		t.Fatalf("frame data = %+v, want %+v", ev, want)
	}
}

// Events of nodepools and machines are used because clusterd does not react to them: the
// stream holds exactly what the test publishes.
func TestEventStream_SendsTheClustersEventsOnlyAsServerSentEvents(t *testing.T) {
	e := start(t)
	resp, ch := e.openStream("/v1/clusters/demo/events")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ContentTypeEventStream {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	first := e.publish("demo", events.ResourceNodePool, "updated")
	e.publish("other", events.ResourceNodePool, "updated")
	second := e.publish("demo", events.ResourceMachine, "created")
	checkFrame(t, next(t, ch), first)
	checkFrame(t, next(t, ch), second)

	// Nothing of "other" is in between: the next frame is the next event of demo.
	third := e.publish("demo", events.ResourceNodePool, "deleted")
	checkFrame(t, next(t, ch), third)
}

func TestEventStream_WithSince_ReplaysEarlierEventsFirst(t *testing.T) {
	e := start(t)
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	before := e.publish("demo", events.ResourceNodePool, "updated")
	e.publish("other", events.ResourceNodePool, "updated")

	_, ch := e.openStream("/v1/clusters/demo/events?since=" + since)
	checkFrame(t, next(t, ch), before)
	after := e.publish("demo", events.ResourceMachine, "created")
	checkFrame(t, next(t, ch), after)
}

func TestEventStream_RefusesBadInput(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		path  string
		code  int
		field string
	}{
		{"/v1/clusters/demo/events?since=yesterday", http.StatusBadRequest, "since"},
		{"/v1/clusters/Not_A_Name/events", http.StatusNotFound, ""},
	} {
		code, h, body := e.do(http.MethodGet, tc.path, "", "")
		if code != tc.code || h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s %s", tc.path, code, h.Get("Content-Type"), body)
			continue
		}
		if tc.field != "" {
			var p struct {
				Errors []struct{ Field string } `json:"errors"`
			}
			if err := json.Unmarshal(body, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Errorf("%s: problem %s does not name field %q", tc.path, body, tc.field)
			}
		}
	}
}

// A caller holds at most Config.EventStreamsPerCaller event streams at once: one more is
// answered 429 saying why, while another token's streams are unaffected; closing one gives
// its slot back.
func TestEventStream_ACallerHoldsAtMostItsShareOfStreams(t *testing.T) {
	e := start(t)
	url := authtest.Server(t, e.d.Routes,
		auth.Token{Name: "dashboard", Token: "dashboard-token-0123456789", Role: auth.RoleViewer},
		auth.Token{Name: "ci", Token: "ci-token-0123456789abcdef", Role: auth.RoleViewer})
	open := func(token string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/clusters/demo/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, cancel
	}
	var first context.CancelFunc
	for n := range DefaultEventStreamsPerCaller {
		resp, cancel := open("dashboard-token-0123456789")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of the dashboard: %d", n+1, resp.StatusCode)
		}
		if n == 0 {
			first = cancel
		}
	}
	resp, _ := open("dashboard-token-0123456789")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "token dashboard holds 8 event streams") {
		t.Fatalf("one stream too many: %d %s; want 429 saying why", resp.StatusCode, body)
	}
	if resp, _ := open("ci-token-0123456789abcdef"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another token's stream: %d", resp.StatusCode)
	}
	first()
	testenv.Eventually(t, 10*time.Second, func() bool {
		resp, cancel := open("dashboard-token-0123456789")
		defer cancel()
		return resp.StatusCode == http.StatusOK
	}, "closing a stream never gave its slot back")
}
