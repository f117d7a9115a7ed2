package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	hpclient "github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/test/apicheck"
)

// ownStack starts a `hostplane dev` of the test's own on random ports and a temp data dir
// (for a test that changes what the stack sees, such as its release cache); stack (shared_test.go)
// is the one most tests share.
func ownStack(t *testing.T) (*dev.Stack, *client) {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	s, c := startStackAt(t, t.TempDir())
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s, c
}

// client is the public API client (pkg/client) with the test's failure handling: a request
// that cannot be sent fails the test; any answer, error or not, goes back to the caller.
type client struct {
	t       *testing.T
	base    string
	dataDir string
	token   string // the front door's admin token, sent as Authorization: Bearer
	api     *hpclient.Client
}

// newClient talks to the API at base with the bearer token; dataDir is the stack's, if any.
func newClient(t *testing.T, base, token, dataDir string) *client {
	t.Helper()
	// Every request and answer is checked against the OpenAPI document: a drift fails the test.
	ac, err := hpclient.New(hpclient.Options{
		Server: base, Token: token, UserAgent: "hostplane-e2e", Transport: apicheck.ForTest(t, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, base: base, dataDir: dataDir, token: token, api: ac}
}

// do sends a request; body "" sends none. The answer is decoded into out when non-nil.
func (c *client) do(method, path, body string, out any) (int, []byte) {
	c.t.Helper()
	var in []byte
	if body != "" {
		in = []byte(body)
	}
	code, b, err := c.api.Raw(context.Background(), method, path, in)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil && code < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return code, b
}

func (c *client) cluster(name string) (api.Cluster, int) {
	var cl api.Cluster
	code, _ := c.do("GET", "/v1/clusters/"+name, "", &cl)
	return cl, code
}

// waitCondition waits until the cluster's condition has the status, and returns the cluster.
func (c *client) waitCondition(name, typ string, status api.ConditionStatus, timeout time.Duration) api.Cluster {
	c.t.Helper()
	var cl api.Cluster
	testenv.Eventually(c.t, timeout, func() bool {
		cl, _ = c.cluster(name)
		got, ok := cl.Status.Conditions.Get(typ)
		return ok && got.Status == status
	}, "cluster %s: %s never became %s; conditions: %s", name, typ, status, lazyJSON{&cl})
	return cl
}

// restConfig is the client configuration of the kubeconfig the API hands out for cluster name.
func (c *client) restConfig(name string) *rest.Config {
	c.t.Helper()
	code, kc := c.do("GET", "/v1/clusters/"+name+"/kubeconfig", "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("kubeconfig: %d %s", code, kc)
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		c.t.Fatalf("kubeconfig does not load: %v", err)
	}
	return cfg
}

func (c *client) kubeClient(name string) *kubernetes.Clientset {
	c.t.Helper()
	cs, err := kubernetes.NewForConfig(c.restConfig(name))
	if err != nil {
		c.t.Fatal(err)
	}
	return cs
}

// lazyJSON renders a value as JSON when the failure message is formatted.
type lazyJSON struct{ v any }

func (l lazyJSON) String() string {
	b, _ := json.MarshalIndent(l.v, "", "  ")
	return string(b)
}

func (l lazyJSON) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(l.String())) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}
