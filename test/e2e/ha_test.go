package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// endpointPoller polls the cluster's endpoint until stopped, every 100ms, two ways, counting
// failures: GET /readyz on a new connection each time (as a monitor or a load balancer's
// health check does), and an API read (GET /version) over client-go's kept-alive connection.
type endpointPoller struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       context.CancelFunc
	done       chan struct{}
}

func (c *client) pollEndpoint(name string) *endpointPoller {
	c.t.Helper()
	code, kubeconfig := c.do("GET", "/v1/clusters/"+name+"/kubeconfig", "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("kubeconfig: %d %s", code, kubeconfig)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		c.t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
	kept := c.kubeClient(name)
	ctx, cancel := context.WithCancel(context.Background())
	p := &endpointPoller{stop: cancel, done: make(chan struct{})}
	record := func(what string, err error) {
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.failed.Add(1)
			p.mu.Lock()
			p.errs = append(p.errs, time.Now().Format("15:04:05.000")+" "+what+": "+failedChecks(err.Error()))
			p.mu.Unlock()
			return
		}
		p.ok.Add(1)
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			record("/readyz on a new connection", getReadyz(ctx, fresh, cfg.Host))
			_, err := kept.Discovery().ServerVersion()
			record("GET /version on a kept-alive connection", err)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func getReadyz(ctx context.Context, c *http.Client, host string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return nil
}

func (p *endpointPoller) finish(t *testing.T, during string) {
	t.Helper()
	p.stop()
	<-p.done
	t.Logf("%s: %d requests answered, %d failed", during, p.ok.Load(), p.failed.Load())
	if p.failed.Load() > 0 {
		t.Errorf("%s: %d requests through the endpoint failed: %v", during, p.failed.Load(), p.errs)
	}
	if p.ok.Load() == 0 {
		t.Errorf("%s: no request succeeded", during)
	}
}

func (c *client) componentHashes(name string) map[string]string {
	var comps api.ComponentList
	if code, body := c.do("GET", "/v1/clusters/"+name+"/components", "", &comps); code != http.StatusOK {
		c.t.Fatalf("components: %d %s", code, body)
	}
	out := map[string]string{}
	for _, comp := range comps.Items {
		out[comp.Name] = comp.Spec.ConfigHash
	}
	return out
}

// allRolledOut reports whether every component's hash differs from before and every replica
// runs it, ready.
func (c *client) allRolledOut(name string, before map[string]string) bool {
	var comps api.ComponentList
	if code, _ := c.do("GET", "/v1/clusters/"+name+"/components", "", &comps); code != http.StatusOK || len(comps.Items) != len(before) {
		return false
	}
	for _, comp := range comps.Items {
		if comp.Spec.Replicas == 0 {
			continue // the idle autoscaler: nothing runs, nothing rolls
		}
		if comp.Spec.ConfigHash == before[comp.Name] || !comp.Status.Conditions.IsTrue(api.ConditionRolloutComplete) {
			return false
		}
		for _, r := range comp.Status.Replicas {
			if r.ConfigHash != comp.Spec.ConfigHash || !r.Ready {
				return false
			}
		}
	}
	return true
}

// TestCluster_HighlyAvailable_ServesEveryRequestDuringUpgradeAndRotation polls the
// load-balanced endpoint while the control plane is upgraded and its certificates rotated:
// kube-apiserver replicas are drained from the load balancer before they stop and roll one
// at a time, so no request may fail.
//
// /readyz is polled on a new connection each time: a kept-alive connection stays with its
// replica, and a draining replica rightly answers /readyz with "[-]shutdown" for its
// --shutdown-delay-duration while it still serves every other request.
func TestCluster_HighlyAvailable_ServesEveryRequestDuringUpgradeAndRotation(t *testing.T) {
	_, c := stack(t)
	code, body := c.do("POST", "/v1/clusters", `{"name":"ha","spec":{"release":{"version":"`+oldRelease+`"},"controllerAvailabilityPolicy":"HighlyAvailable"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	c.waitCondition("ha", api.ConditionAvailable, api.ConditionTrue, available)

	before := c.componentHashes("ha")
	poll := c.pollEndpoint("ha")
	if code, body := c.do("PATCH", "/v1/clusters/ha", `{"spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusOK {
		t.Fatalf("upgrade: %d %s", code, body)
	}
	var cl api.Cluster
	testenv.Eventually(t, available, func() bool {
		cl, _ = c.cluster("ha")
		h := cl.Status.Version
		return h != nil && len(h.History) > 0 && h.History[0].Version == newRelease && h.History[0].CompletionTime != nil
	}, "upgrade never completed: %s", lazyJSON{&cl})
	poll.finish(t, "upgrade")
	after := c.componentHashes("ha")
	if after[api.ComponentEtcd] != before[api.ComponentEtcd] {
		t.Errorf("the upgrade rolled etcd, which does not depend on the release")
	}

	poll = c.pollEndpoint("ha")
	if code, body := c.do("POST", "/v1/clusters/ha/pki/rotate", "", nil); code != http.StatusAccepted {
		t.Fatalf("rotate: %d %s", code, body)
	}
	testenv.Eventually(t, available, func() bool { return c.allRolledOut("ha", after) },
		"not every component rolled onto the rotated certificates")
	poll.finish(t, "certificate rotation")
	// The rotated cluster still answers with a freshly fetched kubeconfig.
	if _, err := c.kubeClient("ha").Discovery().ServerVersion(); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
}

// failedChecks keeps the failing lines ("[-]...") of a /readyz answer, or the whole error.
func failedChecks(msg string) string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(msg, `\n`, "\n"), "\n") {
		if strings.HasPrefix(l, "[-]") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return msg
	}
	return strings.Join(out, "; ")
}
