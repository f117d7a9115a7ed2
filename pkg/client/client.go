// Package client is the Go client of Hostplane's /v1 HTTP API, the one the hostplane command
// line, the end-to-end tests and the benchmarks all use: typed calls for clusters and their components, PKI and infrastructure, a
// generic Do for resources without a typed call yet, and a Server-Sent Events reader for a
// cluster's event stream.
//
// Every answer that is not a success becomes an *Error carrying the server's problem+json.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// DefaultServer is where `hostplane dev` listens by default.
const DefaultServer = "http://127.0.0.1:8080"

// maxBody bounds what the client reads of one answer.
const maxBody = 32 << 20

// Options configure a Client.
type Options struct {
	// Server is the API's base URL (scheme://host[:port][/prefix]); default DefaultServer.
	Server string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// UserAgent is sent on every request.
	UserAgent string
	// HTTPClient, when set, replaces the default client (30 s timeout for plain requests;
	// streams have none).
	HTTPClient *http.Client
	// Transport, when set, sends the requests of the default clients (it is ignored when
	// HTTPClient is set): a proxy, a recorder, or a test's checking RoundTripper.
	Transport http.RoundTripper
}

// Client talks to one Hostplane API.
type Client struct {
	base   *url.URL
	token  string
	ua     string
	http   *http.Client
	stream *http.Client
}

// New validates opts and returns a Client.
func New(opts Options) (*Client, error) {
	if opts.Server == "" {
		opts.Server = DefaultServer
	}
	u, err := url.Parse(opts.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http(s) URL such as %s", opts.Server, DefaultServer)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, token: opts.Token, ua: opts.UserAgent, http: opts.HTTPClient, stream: opts.HTTPClient}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second, Transport: opts.Transport}
		c.stream = &http.Client{Transport: opts.Transport}
	}
	if c.ua == "" {
		c.ua = "hostplane-cli"
	}
	return c, nil
}

// ClusterPath returns /v1/clusters/<name>[/<sub>...] with each part escaped.
func ClusterPath(name string, sub ...string) string {
	p := "/v1/clusters/" + url.PathEscape(name)
	for _, s := range sub {
		p += "/" + url.PathEscape(s)
	}
	return p
}

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawPath = ""
	u.RawQuery = q
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// Do sends a request with in (JSON-encoded unless nil, or raw if a json.RawMessage) and
// decodes a JSON answer into out (unless out is nil; *[]byte receives the raw body).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, ok := in.(json.RawMessage)
		if !ok {
			var err error
			if b, err = json.Marshal(in); err != nil {
				return err
			}
		}
		body = b
	}
	a, err := c.send(ctx, method, path, in != nil, body)
	if err != nil {
		return err
	}
	if a.status >= 300 {
		return answerError(a.req, a.status, a.contentType, a.body)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = a.body
		return nil
	default:
		if err := json.Unmarshal(a.body, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, a.req.URL.Path, err)
		}
		return nil
	}
}

// Raw sends body as it is (none when nil) and returns the answer's status and body whatever
// the status: for callers that judge error answers themselves, such as tests of the API.
// Only a failure to reach the server is an error.
func (c *Client) Raw(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	a, err := c.send(ctx, method, path, body != nil, body)
	if err != nil {
		return 0, nil, err
	}
	return a.status, a.body, nil
}

// answer is what send read of one response.
type answer struct {
	req         *http.Request
	status      int
	contentType string
	body        []byte
}

// send makes one request; hasBody sets the content type (a merge patch for PATCH).
func (c *Client) send(ctx context.Context, method, path string, hasBody bool, body []byte) (answer, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := c.newRequest(ctx, method, path, rd)
	if err != nil {
		return answer{}, err
	}
	if hasBody {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return answer{}, fmt.Errorf("%w at %s: reading the answer: %v", ErrUnreachable, c.base, err)
	}
	return answer{req: req, status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}, nil
}

func (c *Client) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return fmt.Errorf("%w at %s: %v (is the server running? set --server or HOSTPLANE_SERVER)", ErrUnreachable, c.base, err)
}

// answerError builds the *Error of a non-2xx answer.
func answerError(req *http.Request, status int, ct string, body []byte) *Error {
	e := &Error{Method: req.Method, URL: req.URL.Path, Status: status}
	if strings.Contains(ct, "json") && json.Unmarshal(body, &e.Problem) == nil && e.Problem.Status != 0 {
		return e
	}
	// Not a problem: a proxy's or a plain-text answer. Keep a short, printable detail.
	e.Problem = httpapi.Problem{Status: status, Title: http.StatusText(status)}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	e.Problem.Detail = fmt.Sprintf("%s %s: %d %s", req.Method, req.URL.Path, status, http.StatusText(status))
	if text != "" && !strings.Contains(ct, "html") {
		e.Problem.Detail += ": " + text
	}
	return e
}

// call sends a request with in (see Do) and decodes the JSON answer into a new T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	var out T
	return &out, c.Do(ctx, method, path, in, &out)
}

// ListClusters answers GET /v1/clusters.
func (c *Client) ListClusters(ctx context.Context) (*api.ClusterList, error) {
	return call[api.ClusterList](ctx, c, http.MethodGet, "/v1/clusters", nil)
}

// GetCluster answers GET /v1/clusters/{name}.
func (c *Client) GetCluster(ctx context.Context, name string) (*api.Cluster, error) {
	return call[api.Cluster](ctx, c, http.MethodGet, ClusterPath(name), nil)
}

// CreateCluster sends POST /v1/clusters with the cluster's name and spec.
func (c *Client) CreateCluster(ctx context.Context, cl *api.Cluster) (*api.Cluster, error) {
	in := struct {
		Name string          `json:"name"`
		Spec api.ClusterSpec `json:"spec"`
	}{cl.Name, cl.Spec}
	return call[api.Cluster](ctx, c, http.MethodPost, "/v1/clusters", in)
}

// PatchCluster sends a JSON merge patch of the cluster's spec ({"spec":{...}}).
func (c *Client) PatchCluster(ctx context.Context, name string, patch any) (*api.Cluster, error) {
	return call[api.Cluster](ctx, c, http.MethodPatch, ClusterPath(name), patch)
}

// DeleteCluster sends DELETE /v1/clusters/{name}; the answer is the cluster, now deleting.
func (c *Client) DeleteCluster(ctx context.Context, name string) (*api.Cluster, error) {
	return call[api.Cluster](ctx, c, http.MethodDelete, ClusterPath(name), nil)
}

// Kubeconfig returns the cluster's break-glass admin kubeconfig (YAML; system:masters).
func (c *Client) Kubeconfig(ctx context.Context, name string) ([]byte, error) {
	var b []byte
	return b, c.Do(ctx, http.MethodGet, ClusterPath(name, "kubeconfig"), nil, &b)
}

// IssueKubeconfig answers POST /v1/clusters/{name}/kubeconfigs: a kubeconfig of the
// caller's own, valid for ttl ("": the default, 1h).
func (c *Client) IssueKubeconfig(ctx context.Context, name, ttl string) ([]byte, error) {
	var b []byte
	return b, c.Do(ctx, http.MethodPost, ClusterPath(name, "kubeconfigs"), api.KubeconfigRequest{TTL: ttl}, &b)
}

// UserData answers GET /v1/clusters/{cluster}/nodepools/{name}/userdata: the Ignition
// config a machine of the pool boots with.
func (c *Client) UserData(ctx context.Context, cluster, name string) ([]byte, error) {
	var b []byte
	return b, c.Do(ctx, http.MethodGet, ClusterPath(cluster, "nodepools", name, "userdata"), nil, &b)
}

// Components answers GET /v1/clusters/{name}/components.
func (c *Client) Components(ctx context.Context, name string) (*api.ComponentList, error) {
	return call[api.ComponentList](ctx, c, http.MethodGet, ClusterPath(name, "components"), nil)
}

// PKI answers GET /v1/clusters/{name}/pki.
func (c *Client) PKI(ctx context.Context, name string) (*api.PKIStatus, error) {
	return call[api.PKIStatus](ctx, c, http.MethodGet, ClusterPath(name, "pki"), nil)
}

// ResealPKI answers POST /v1/pki/reseal: pkid seals every PKI record again with its current
// seal key.
func (c *Client) ResealPKI(ctx context.Context) (*api.ResealStatus, error) {
	return call[api.ResealStatus](ctx, c, http.MethodPost, "/v1/pki/reseal", nil)
}

// Infra answers GET /v1/clusters/{name}/infra.
func (c *Client) Infra(ctx context.Context, name string) (*api.Infra, error) {
	return call[api.Infra](ctx, c, http.MethodGet, ClusterPath(name, "infra"), nil)
}

// Releases answers GET /v1/releases: every release and whether it can run now.
func (c *Client) Releases(ctx context.Context) (*api.ReleaseList, error) {
	return call[api.ReleaseList](ctx, c, http.MethodGet, "/v1/releases", nil)
}

// GetNodePool answers GET /v1/clusters/{cluster}/nodepools/{name}.
func (c *Client) GetNodePool(ctx context.Context, cluster, name string) (*api.NodePool, error) {
	return call[api.NodePool](ctx, c, http.MethodGet, ClusterPath(cluster, "nodepools", name), nil)
}
