package apicheck

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"testing"
)

// Violation is one exchange the document does not describe.
type Violation struct {
	Method string
	Path   string
	// Status is the answer's status.
	Status int
	Err    error
}

func (v *Violation) Error() string {
	return fmt.Sprintf("OpenAPI: %s %s → %d: %v", v.Method, v.Path, v.Status, v.Err)
}

func (v *Violation) Unwrap() error { return v.Err }

// Transport returns an http.RoundTripper that sends each request through next (nil:
// http.DefaultTransport) and reports to report (which must be safe for concurrent use):
//
//   - a request to a route the document lacks, unless the server answers 404 or 405;
//   - a request the document rejects (its parameters, body or bearer token) that the server
//     does not answer with a 4xx: the server took what the document forbids;
//   - an answer whose status, headers, content type or body the document does not give the
//     operation.
//
// Bodies are read whole and handed on unchanged; a Server-Sent Events answer
// (text/event-stream) is passed through as it streams, its status and headers checked.
func (c *Checker) Transport(next http.RoundTripper, report func(*Violation)) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{c: c, next: next, report: report}
}

type transport struct {
	c      *Checker
	next   http.RoundTripper
	report func(*Violation)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		out := req.Clone(req.Context())
		out.Body = readCloser(b)
		out.GetBody = func() (io.ReadCloser, error) { return readCloser(b), nil }
		out.ContentLength = int64(len(b))
		req = out
	}
	in, reqErr := t.c.request(req, body)

	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	status := resp.StatusCode
	violation := func(err error) {
		t.report(&Violation{Method: req.Method, Path: req.URL.RequestURI(), Status: status, Err: err})
	}
	if in == nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			violation(reqErr)
		}
		return resp, nil
	}
	if reqErr != nil && (status < 400 || status >= 500) {
		violation(fmt.Errorf("the document rejects the request, the server did not: %w", reqErr))
	}
	if streaming(resp) {
		if err := t.c.response(req.Context(), in, resp, nil); err != nil {
			violation(err)
		}
		return resp, nil
	}
	b, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = readCloser(b)
	if readErr != nil {
		// Hand the caller what arrived and then the error, as the original body would have.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{readErr}))
		return resp, nil
	}
	if err := t.c.response(req.Context(), in, resp, b); err != nil {
		violation(err)
	}
	return resp, nil
}

// streaming reports whether the answer is a stream that must not be read whole.
func streaming(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var (
	shared     *Checker
	sharedErr  error
	sharedOnce sync.Once
)

// ForTest returns next (nil: http.DefaultTransport) wrapped so that every exchange the
// document does not describe fails t with t.Errorf, naming the method, path, status and what
// the validator found. The document is loaded once per test binary; a document that does not
// validate fails t at once.
func ForTest(t testing.TB, next http.RoundTripper) http.RoundTripper {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = New(t.Context()) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared.Transport(next, func(v *Violation) {
		t.Helper()
		t.Errorf("%v", v)
	})
}
