package localcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/reread"
)

// unixScheme prefixes a unix socket URL: "unix:///abs/path.sock".
const unixScheme = "unix://"

// Client talks to a Cloud over its HTTP API. It is safe for concurrent use.
type Client struct {
	base  string // "http://host:port" or "http://localcloud" over a unix socket
	http  *http.Client
	token *reread.File[string] // nil: no Authorization header
}

// ClientOption configures a Client.
type ClientOption func(*Client) error

// WithTokenFile sends the bearer token of path (auth.ParseToken, the cloud's
// Config.TokenFile) with every request, read again when the file changes.
func WithTokenFile(path string) ClientOption {
	return func(c *Client) error {
		f, err := reread.New(path, auth.ParseToken)
		if err != nil {
			return fmt.Errorf("%w: token file %w", ErrInvalid, err)
		}
		c.token = f
		return nil
	}
}

// NewClient returns a client of the cloud at u, as Cloud.URL returns it: "unix:///abs/path.sock"
// or "http://127.0.0.1:port".
func NewClient(u string, opts ...ClientOption) (*Client, error) {
	c, err := newClient(u)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func newClient(u string) (*Client, error) {
	if path, ok := strings.CutPrefix(u, unixScheme); ok {
		if path == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("%w: socket URL %q is not unix:///absolute/path", ErrInvalid, u)
		}
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     time.Minute,
		}
		return &Client{base: "http://localcloud", http: &http.Client{Transport: tr}}, nil
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return nil, fmt.Errorf("%w: cloud URL %q is neither unix:///path nor http://host:port", ErrInvalid, u)
	}
	return &Client{base: strings.TrimSuffix(u, "/"), http: &http.Client{}}, nil
}

// Create asks for a machine. It is idempotent per (cluster, name): creating an existing
// machine returns its status (and, while it has not joined yet, gives it the new UserData).
func (c *Client) Create(ctx context.Context, spec MachineSpec) (MachineStatus, error) {
	return call[MachineStatus](ctx, c, http.MethodPost, "/machines", spec)
}

// Get returns a machine's status; the error is ErrNotFound (errors.Is) when it is absent.
func (c *Client) Get(ctx context.Context, cluster, name string) (MachineStatus, error) {
	return call[MachineStatus](ctx, c, http.MethodGet, machinePath(cluster, name), nil)
}

// List returns the machines of cluster, or of every cluster when cluster is "".
func (c *Client) List(ctx context.Context, cluster string) ([]MachineStatus, error) {
	p := "/machines"
	if cluster != "" {
		p += "?cluster=" + url.QueryEscape(cluster)
	}
	l, err := call[MachineList](ctx, c, http.MethodGet, p, nil)
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Delete stops a machine and removes it. Deleting an absent machine is not an error.
func (c *Client) Delete(ctx context.Context, cluster, name string) error {
	err := c.do(ctx, http.MethodDelete, machinePath(cluster, name), nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Fault injects fault (api.FaultStopHeartbeats, api.FaultCrash or api.FaultFailNextBoot) on
// a machine; another type is ErrUnknownFault.
func (c *Client) Fault(ctx context.Context, cluster, name, fault string) (MachineStatus, error) {
	if !knownFault(fault) {
		return MachineStatus{}, fmt.Errorf("%w: %q", ErrUnknownFault, fault)
	}
	return call[MachineStatus](ctx, c, http.MethodPost, machinePath(cluster, name)+"/fault", FaultRequest{Type: fault})
}

// Reconfigure updates a machine in place: it re-fetches its Ignition config with userData
// (an Ignition stub), applies it and reports the new ConfigHash and KubeletVersion once done.
// It returns at once; a call with the userData already applied or being applied is a no-op.
func (c *Client) Reconfigure(ctx context.Context, cluster, name string, userData []byte) (MachineStatus, error) {
	return call[MachineStatus](ctx, c, http.MethodPost, machinePath(cluster, name)+"/userdata", UserDataRequest{UserData: userData})
}

// Power powers a machine off (on false: it stops, keeping its disk, credentials and Node
// name) or a powered-off one on again (it resumes as the same Node). A machine already in
// that state, or one that crashed, is left as it is.
func (c *Client) Power(ctx context.Context, cluster, name string, on bool) (MachineStatus, error) {
	return call[MachineStatus](ctx, c, http.MethodPost, machinePath(cluster, name)+"/power", PowerRequest{On: on})
}

// InstanceTypes lists the machine shapes the cloud offers (api.LocalInstanceTypes).
func (c *Client) InstanceTypes(ctx context.Context) ([]api.InstanceType, error) {
	l, err := call[api.InstanceTypeList](ctx, c, http.MethodGet, "/instancetypes", nil)
	return l.Items, err
}

// Healthy returns nil when the cloud answers /healthz.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, httpapi.PathHealthz, nil, nil)
}

func machinePath(cluster, name string) string {
	return "/machines/" + url.PathEscape(cluster) + "/" + url.PathEscape(name)
}

// call sends a request with in (JSON, none when nil) and decodes the answer into a T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.do(ctx, method, path, in, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("localcloud: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("localcloud: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != nil {
		tok, _ := c.token.Get() // the last good token while the file is being replaced
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("localcloud: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("localcloud: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return problemError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("localcloud: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// problemError turns an error answer into an error that matches this package's sentinels.
func problemError(status int, data []byte) error {
	p := httpapi.Problem{Status: status}
	if err := json.Unmarshal(data, &p); err != nil || p.Status == 0 {
		p = httpapi.Problem{Status: status, Detail: strings.TrimSpace(string(data))}
	}
	ae := p.Err()
	switch ae.Code {
	case api.CodeUnauthenticated:
		return fmt.Errorf("localcloud: the cloud refused the request's token (the token file, %s, must hold the cloud's): %w", EnvTokenFile, ae)
	case api.CodeNotFound:
		return fmt.Errorf("%w: %w", ErrNotFound, ae)
	case api.CodeInvalid:
		for _, f := range ae.Fields {
			if f.Field == "type" {
				return fmt.Errorf("%w: %w", ErrUnknownFault, ae)
			}
		}
		return fmt.Errorf("%w: %w", ErrInvalid, ae)
	}
	return fmt.Errorf("localcloud: %w", ae)
}

func knownFault(f string) bool {
	switch f {
	case api.FaultStopHeartbeats, api.FaultCrash, api.FaultFailNextBoot:
		return true
	}
	return false
}
