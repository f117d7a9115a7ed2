package apicheck_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hostplane/hostplane/test/apicheck"
)

func TestOpenAPI_DocumentIsValidForAStandardValidator(t *testing.T) {
	doc, err := apicheck.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if doc.Paths.Len() == 0 {
		t.Fatal("openapi.json has no paths")
	}
}

// exchange sends one request through a checking transport to a server answering with h,
// and returns the violations reported and the body the caller read.
func exchange(t *testing.T, h http.HandlerFunc, method, path, token, body string) ([]*apicheck.Violation, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := apicheck.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*apicheck.Violation
	hc := &http.Client{Transport: c.Transport(nil, func(v *apicheck.Violation) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, v)
	})}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return got, string(b)
}

func answer(status int, ct, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const problem = `{"type":"https://hostplane.dev/problems/not-found","title":"Not Found","status":404,"detail":"no cluster demo"}`

func TestTransport_ReportsWhatTheDocumentDoesNotDescribe(t *testing.T) {
	for _, tc := range []struct {
		name              string
		h                 http.HandlerFunc
		method, path, tok string
		body              string
		want              string // in the violation; "" for none
	}{
		{name: "documented answer", h: answer(404, "application/problem+json", problem),
			method: "GET", path: "/v1/clusters/demo", tok: "t"},
		{name: "undocumented status", h: answer(418, "application/problem+json", problem),
			method: "GET", path: "/v1/clusters/demo", tok: "t", want: "status is not supported"},
		{name: "wrong content type", h: answer(404, "text/plain", "no"),
			method: "GET", path: "/v1/clusters/demo", tok: "t", want: "Content-Type"},
		{name: "body off its schema", h: answer(200, "application/json", `{"items":"none"}`),
			method: "GET", path: "/v1/clusters", tok: "t", want: "doesn't match schema"},
		{name: "undocumented route", h: answer(200, "application/json", `{}`),
			method: "GET", path: "/v1/nothing", tok: "t", want: "not in the document"},
		{name: "undocumented route answered 404", h: answer(404, "application/problem+json", problem),
			method: "GET", path: "/v1/nothing", tok: "t"},
		{name: "no token, accepted", h: answer(200, "application/json", `{"items":[]}`),
			method: "GET", path: "/v1/clusters", want: "rejects the request"},
		{name: "no token, refused", h: answer(401, "application/problem+json", strings.ReplaceAll(problem, "404", "401")),
			method: "GET", path: "/v1/clusters"},
		{name: "invalid body, accepted", h: answer(202, "application/json", `{"name":"x"}`),
			method: "POST", path: "/v1/clusters", tok: "t", body: `{"name":7}`, want: "rejects the request"},
		{name: "open route", h: answer(200, "text/plain; version=0.0.4; charset=utf-8", "up 1\n"),
			method: "GET", path: "/metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := exchange(t, tc.h, tc.method, tc.path, tc.tok, tc.body)
			if tc.want == "" {
				for _, v := range got {
					t.Errorf("unexpected violation: %v", v)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(got[0].Error(), tc.want) {
				t.Fatalf("violations %v, the first containing %q", got, tc.want)
			}
			if v := got[0]; v.Method != tc.method || !strings.HasPrefix(v.Path, tc.path) || v.Status == 0 {
				t.Errorf("violation names %s %s %d, want %s %s and the status", v.Method, v.Path, v.Status, tc.method, tc.path)
			}
		})
	}
}

func TestTransport_PassesBodiesAndStreamsThroughUnchanged(t *testing.T) {
	sent := make(chan string, 1)
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sent <- string(b)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, strings.ReplaceAll(problem, "404", "400"))
	}
	got, body := exchange(t, echo, "POST", "/v1/clusters", "t", `{"name":"demo","spec":{}}`)
	if s := <-sent; s != `{"name":"demo","spec":{}}` {
		t.Errorf("server received %q", s)
	}
	if !strings.Contains(body, `"status":400`) {
		t.Errorf("caller read %q", body)
	}
	for _, v := range got {
		t.Errorf("unexpected violation: %v", v)
	}

	// An event stream reaches the caller event by event while the server still writes.
	next := make(chan struct{})
	stream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-next
		_, _ = io.WriteString(w, "data: two\n\n")
	}
	srv := httptest.NewServer(http.HandlerFunc(stream))
	defer srv.Close()
	hc := &http.Client{Transport: apicheck.ForTest(t, nil)}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/clusters/demo/events", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: one\n\n" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	close(next)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: two\n\n" {
		t.Errorf("then %q", rest)
	}
}
