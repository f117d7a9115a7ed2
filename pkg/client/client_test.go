package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// problemServer answers every request with err as problem+json, through the same httpapi
// code the daemons use.
func problemServer(t *testing.T, err error) *client.Client {
	t.Helper()
	srv := httptest.NewServer(httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error { return err }))
	t.Cleanup(srv.Close)
	c, cerr := client.New(client.Options{Server: srv.URL})
	if cerr != nil {
		t.Fatal(cerr)
	}
	return c
}

func TestError_PrintsTheProblemDetailAndEveryFieldError(t *testing.T) {
	var fe api.FieldErrors
	fe.Add("name", "must be a DNS label")
	fe.Add("spec.release.version", "unknown release %q", "9.9.9")
	c := problemServer(t, fe.Err())
	_, err := c.GetCluster(context.Background(), "x")
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want *client.Error", err, err)
	}
	want := "the request has invalid fields\n  name: must be a DNS label\n  spec.release.version: unknown release \"9.9.9\""
	if e.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", e.Error(), want)
	}
	if e.Code() != api.CodeInvalid || e.Status != http.StatusBadRequest {
		t.Errorf("code %s status %d", e.Code(), e.Status)
	}
}

func TestError_TellsAMissingRouteFromAMissingObject(t *testing.T) {
	router := httpapi.NewRouter(httpapi.Config{})
	router.Get("/v1/clusters/{cluster}", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
		return api.Errorf(api.CodeNotFound, "cluster %q not found", "x")
	}))
	srv := httptest.NewServer(router)
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})

	_, err := c.GetCluster(context.Background(), "x")
	if !client.IsNotFound(err) || client.IsRouteMissing(err) {
		t.Errorf("missing cluster: IsNotFound %v IsRouteMissing %v (%v)", client.IsNotFound(err), client.IsRouteMissing(err), err)
	}
	err = c.Do(context.Background(), http.MethodGet, client.ClusterPath("x", "nodepools"), nil, nil)
	if client.IsNotFound(err) || !client.IsRouteMissing(err) {
		t.Errorf("missing route: IsNotFound %v IsRouteMissing %v (%v)", client.IsNotFound(err), client.IsRouteMissing(err), err)
	}
}

func TestError_AnswerThatIsNotAProblemKeepsStatusAndText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream went away", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})
	_, err := c.ListClusters(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadGateway || !strings.Contains(e.Error(), "upstream went away") {
		t.Fatalf("err = %v", err)
	}
}

func TestClient_SendsTheBearerToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		httpapi.WriteJSON(w, http.StatusOK, api.ClusterList{})
	}))
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL + "/", Token: "s3cr3t-token-0123456"})
	if _, err := c.ListClusters(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer s3cr3t-token-0123456" {
		t.Errorf("Authorization = %q", got)
	}
}

// countingTransport counts the requests it sends.
type countingTransport struct {
	mu sync.Mutex
	n  int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func TestClient_SendsPlainRequestsAndStreamsThroughTheTransport(t *testing.T) {
	srv := httptest.NewServer(&sseServer{})
	defer srv.Close()
	tr := &countingTransport{}
	c, _ := client.New(client.Options{Server: srv.URL, Transport: tr})
	if _, _, err := c.Raw(context.Background(), http.MethodGet, "/v1/clusters", nil); err != nil {
		t.Fatal(err)
	}
	s, err := c.Events(context.Background(), "c1", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.n != 2 {
		t.Errorf("the transport sent %d requests, want 2 (one plain, one stream)", tr.n)
	}
}

func TestClient_UnreachableServerSaysWhere(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := client.New(client.Options{Server: url})
	_, err := c.ListClusters(context.Background())
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), url) {
		t.Errorf("err = %v", err)
	}
}

func TestNew_RejectsAServerThatIsNotAnHTTPURL(t *testing.T) {
	for _, s := range []string{"127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := client.New(client.Options{Server: s}); err == nil {
			t.Errorf("New(%q) accepted it", s)
		}
	}
}

// sseServer serves a cluster's events as text/event-stream: each connection replays the
// events after Last-Event-ID, and the first connection drops after two events.
type sseServer struct {
	// replayAll ignores Last-Event-ID and replays every event on each connection.
	replayAll   bool
	mu          sync.Mutex
	lastEventID []string
	conns       int
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.conns++
	conn := s.conns
	s.lastEventID = append(s.lastEventID, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	start := 0
	if id := r.Header.Get("Last-Event-ID"); id != "" && !s.replayAll {
		fmt.Sscan(id, &start)
	}
	fmt.Fprint(w, "retry: 10\n: keep-alive\n\n")
	for i := start + 1; i <= 4; i++ {
		fmt.Fprintf(w, "id: %d\nevent: io.hostplane.component.available\ndata: {\"specversion\":\"1.0\",\"id\":\"e%d\",\n", i, i)
		fmt.Fprintf(w, "data: \"source\":\"/hostplane/componentd\",\"type\":\"io.hostplane.component.available\",\"subject\":\"c1.etcd\",\"time\":\"2026-01-02T03:04:05Z\"}\n\n")
		w.(http.Flusher).Flush()
		if conn == 1 && i == 2 {
			return // drop the connection mid-stream
		}
	}
	<-r.Context().Done()
}

func TestFollow_ReconnectsAndResumesAfterTheLastEvent(t *testing.T) {
	for _, replayAll := range []bool{false, true} {
		t.Run(fmt.Sprintf("server replays all: %v", replayAll), func(t *testing.T) {
			testFollowResumes(t, &sseServer{replayAll: replayAll})
		})
	}
}

func testFollowResumes(t *testing.T, sse *sseServer) {
	srv := httptest.NewServer(sse)
	defer srv.Close()
	c, _ := client.New(client.Options{Server: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var ids []string
	stop := errors.New("seen all")
	disconnects := 0
	err := c.Follow(ctx, "c1", client.FollowOptions{
		OnDisconnect: func(error, time.Duration) { disconnects++ },
	}, func(ev client.StreamEvent) error {
		if ev.Event.Type != "io.hostplane.component.available" || ev.Event.Subject != "c1.etcd" {
			t.Errorf("event not decoded: %+v", ev)
		}
		ids = append(ids, ev.ID)
		if len(ids) == 4 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Follow = %v", err)
	}
	if strings.Join(ids, ",") != "1,2,3,4" {
		t.Errorf("ids = %v: each event once, in order", ids)
	}
	sse.mu.Lock()
	defer sse.mu.Unlock()
	if len(sse.lastEventID) != 2 || sse.lastEventID[0] != "" || sse.lastEventID[1] != "2" {
		t.Errorf("Last-Event-ID per connection = %q, want [\"\" \"2\"]", sse.lastEventID)
	}
	if disconnects != 1 {
		t.Errorf("disconnects = %d", disconnects)
	}
}

func TestFollow_StopsOnARequestError(t *testing.T) {
	c := problemServer(t, api.Errorf(api.CodeForbidden, "not in scope"))
	err := c.Follow(context.Background(), "c1", client.FollowOptions{}, func(client.StreamEvent) error { return nil })
	if client.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("Follow = %v", err)
	}
}
