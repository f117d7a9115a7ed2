package nodepoold

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// setAutoNode turns cluster's autoprovisioning on or off and announces the change as clusterd
// does.
func (e *env) setAutoNode(cluster string, on bool) {
	e.t.Helper()
	if _, _, err := e.clusters.Mutate(context.Background(), cluster, false, func(c *api.Cluster) error {
		c.Spec.AutoNode = nil
		if on {
			c.Spec.AutoNode = &api.AutoNode{ProvisionerConfig: api.ProvisionerConfig{Name: api.ProvisionerKarpenter}}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := bus.NewPublisher(e.nats.JS, "clusterd").Publish(context.Background(), cluster, events.ResourceCluster, events.VerbClusterUpdated, cluster, nil); err != nil {
		e.t.Fatal(err)
	}
}

// spec.autoNode gives the cluster the autonode pool: at the control plane's release, with no
// replicas of its own and Karpenter's registration taint; the API and the inbox refuse to
// change or delete it, and turning autoprovisioning off deletes it.
func TestAutoNodePool_FollowsSpecAutoNodeAndRefusesChangesByHand(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.setAutoNode("demo", true)
	var np *api.NodePool
	testenv.Eventually(t, 20*time.Second, func() bool {
		np = e.getPool("demo", api.AutoNodePoolName)
		return np != nil
	}, "autoprovisioning on, but no autonode pool")
	if np.Spec.Replicas == nil || *np.Spec.Replicas != 0 || np.Spec.Release.Version != "1.34.4" || np.Status.ConfigHash == "" ||
		len(np.Spec.Taints) != 1 || np.Spec.Taints[0].Key != TaintUnregistered || np.Spec.Management.UpgradeType != api.UpgradeTypeReplace {
		t.Errorf("autonode pool = %+v", np.Spec)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.seen("io.hostplane.nodepool.created", "demo/"+api.AutoNodePoolName) },
		"nodepool.created never published for the autonode pool")

	if code, body := e.do(http.MethodPatch, "/v1/clusters/demo/nodepools/"+api.AutoNodePoolName, `{"replicas":2}`); code != http.StatusConflict ||
		!strings.Contains(string(body), "spec.autoNode") {
		t.Errorf("PATCH: %d %s, want 409 naming spec.autoNode", code, body)
	}
	if code, body := e.do(http.MethodDelete, "/v1/clusters/demo/nodepools/"+api.AutoNodePoolName, ""); code != http.StatusConflict {
		t.Errorf("DELETE: %d %s, want 409", code, body)
	}
	if code, body := e.do(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody(api.AutoNodePoolName, replace3)); code != http.StatusBadRequest ||
		!strings.Contains(string(body), "reserved") {
		t.Errorf("POST a pool named %s: %d %s, want 400 (reserved)", api.AutoNodePoolName, code, body)
	}
	e.publishInbound("demo", events.InboundNodePoolScale, "scale-autonode", `{"nodePool":"autonode","replicas":3}`)
	testenv.Eventually(t, 20*time.Second, func() bool {
		reason, _ := e.rejection("scale-autonode")
		return strings.Contains(reason, "spec.autoNode")
	},
		"nodepool.scale of the autonode pool was not rejected")
	if got := e.getPool("demo", api.AutoNodePoolName); got == nil || *got.Spec.Replicas != 0 || got.Generation != np.Generation {
		t.Errorf("the autonode pool changed by hand: %+v", got)
	}

	e.setAutoNode("demo", false)
	testenv.Eventually(t, 20*time.Second, func() bool { return e.getPool("demo", api.AutoNodePoolName) == nil },
		"autoprovisioning off, but the autonode pool stayed")
}
