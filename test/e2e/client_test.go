package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// stack starts `hostplane dev` for one test on random ports and a temp data dir.
func stack(t *testing.T) (*dev.Stack, *client) {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	s, err := dev.Start(context.Background(), dev.Config{
		DataDir: dir, Addr: "127.0.0.1:0", NATSPort: -1,
		Logger: slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	c := &client{t: t, base: s.URL(), dataDir: dir, token: s.AdminToken()}
	testenv.Eventually(t, time.Minute, func() bool {
		code, _ := c.do("GET", "/healthz", "", nil)
		return code == http.StatusOK
	}, "hostplane dev never became healthy")
	return s, c
}

type client struct {
	t       *testing.T
	base    string
	dataDir string
	token   string // the front door's admin token, sent as Authorization: Bearer
}

// do sends a request; body "" sends none. The answer is decoded into out when non-nil.
func (c *client) do(method, path, body string, out any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, b
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

func (c *client) kubeClient(name string) *kubernetes.Clientset {
	c.t.Helper()
	code, kc := c.do("GET", "/v1/clusters/"+name+"/kubeconfig", "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("kubeconfig: %d %s", code, kc)
	}
	cs, err := kube.Clientset(kc)
	if err != nil {
		c.t.Fatalf("kubeconfig does not load: %v", err)
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
