package nodepoold

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const (
	replace3 = `"replicas":3,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","autoRepair":true}`
	motd     = `{\"ignition\":{\"version\":\"3.4.0\"},\"storage\":{\"files\":[{\"path\":\"/etc/motd\",\"contents\":{\"source\":\"data:,hello\"},\"mode\":420}]}}`
)

func TestNodePoolAPI_CreateStoresDefaultsAndTheConfigHash(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	np := e.createPool("demo", poolBody("workers", replace3))
	if np.Generation != 1 || np.Cluster != "demo" || np.Spec.Platform.Type != api.PlatformLocal {
		t.Errorf("stored pool = %+v", np)
	}
	r := np.Spec.Management.Replace
	if r == nil || r.Strategy != api.ReplaceStrategyRollingUpdate || *r.RollingUpdate.MaxSurge != 1 || *r.RollingUpdate.MaxUnavailable != 0 {
		t.Errorf("replace defaults = %+v", r)
	}
	if np.Spec.Platform.Local == nil || np.Spec.Platform.Local.InstanceType != api.DefaultInstanceType {
		t.Errorf("platform = %+v, want the default instance type %s", np.Spec.Platform, api.DefaultInstanceType)
	}
	if np.Status.ConfigHash != ConfigHash(&np.Spec) || len(np.Status.ConfigHash) != 64 {
		t.Errorf("config hash = %q, want ConfigHash of the spec", np.Status.ConfigHash)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.seen("io.hostplane.nodepool.created", "demo/workers") }, "nodepool.created never published")

	status, b := e.do(http.MethodGet, "/v1/clusters/demo/nodepools", "")
	var list api.NodePoolList
	decode(t, b, &list)
	if status != http.StatusOK || len(list.Items) != 1 || list.Items[0].Name != "workers" {
		t.Errorf("list = %d %s", status, b)
	}
	// Without a management cluster the pool is stored but says why it gets no machines.
	testenv.Eventually(t, 10*time.Second, func() bool {
		got := e.getPool("demo", "workers")
		c, _ := got.Status.Conditions.Get(api.NodePoolConditionReady)
		return c.Reason == ReasonNoManagementCluster && got.Status.ObservedGeneration == 1
	}, "the pool never reported the missing management cluster")
}

func TestNodePoolAPI_BadInputsNameTheField(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.putCluster("old", "1.33.13")
	tests := []struct {
		name    string
		cluster string
		body    string
		want    []string
	}{
		{"name missing", "demo", `{"spec":{` + replace3 + `}}`, []string{"name"}},
		{"name not a DNS label", "demo", poolBody("Workers", replace3), []string{"name"}},
		{"name too long", "demo", poolBody(strings.Repeat("w", 46), replace3), []string{"name"}},
		{"unknown field", "demo", poolBody("workers", replace3, `"replicsa":2`), []string{"spec.replicsa"}},
		{"mistyped field", "demo", poolBody("workers", `"replicas":"three","release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`), []string{"spec.replicas"}},
		{"replicas and autoScaling", "demo", poolBody("workers", replace3, `"autoScaling":{"min":1,"max":3}`), []string{"spec.replicas", "spec.autoScaling"}},
		{"autoScaling min above max", "demo", poolBody("workers", `"autoScaling":{"min":4,"max":3},"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`), []string{"spec.autoScaling.max"}},
		{"upgradeType missing", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"}`), []string{"spec.management.upgradeType"}},
		{"upgradeType unknown", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Recreate"}`), []string{"spec.management.upgradeType"}},
		{"strategy unknown", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","replace":{"strategy":"BlueGreen"}}`), []string{"spec.management.replace.strategy"}},
		{"maxSurge and maxUnavailable 0", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","replace":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":0}}}`), []string{"spec.management.replace.rollingUpdate.maxSurge"}},
		{"negative maxUnavailable", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","replace":{"rollingUpdate":{"maxUnavailable":-1}}}`), []string{"spec.management.replace.rollingUpdate.maxUnavailable"}},
		{"release unknown", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.20.0"},"management":{"upgradeType":"Replace"}`), []string{"spec.release.version"}},
		{"release newer than the cluster", "old", poolBody("workers", replace3), []string{"spec.release.version"}},
		{"label key invalid", "demo", poolBody("workers", replace3, `"nodeLabels":{"bad key":"x"}`), []string{"spec.nodeLabels.bad key"}},
		{"taint effect invalid", "demo", poolBody("workers", replace3, `"taints":[{"key":"a","effect":"Never"}]`), []string{"spec.taints[0].effect"}},
		{"drain timeout not a duration", "demo", poolBody("workers", replace3, `"nodeDrainTimeout":"soon"`), []string{"spec.nodeDrainTimeout"}},
		{"repair timeout not a duration", "demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","autoRepairPolicy":{"nodeStartupTimeout":"later"}}`), []string{"spec.management.autoRepairPolicy.nodeStartupTimeout"}},
		{"instance type unknown", "demo", poolBody("workers", replace3, `"platform":{"type":"local","local":{"instanceType":"local.huge"}}`), []string{"spec.platform.local.instanceType"}},
		{"config not Ignition", "demo", poolBody("workers", replace3, `"config":[{"name":"motd","content":"{\"hello\":1}"}]`), []string{"spec.config[0].content"}},
		{"config Ignition v2", "demo", poolBody("workers", replace3, `"config":[{"name":"motd","content":"{\"ignition\":{\"version\":\"2.2.0\"}}"}]`), []string{"spec.config[0].content"}},
		{"config fetched over plain http", "demo", poolBody("workers", replace3, `"config":[{"name":"ok","content":"{\"ignition\":{\"version\":\"3.4.0\"}}"},{"name":"metadata","content":"{\"ignition\":{\"version\":\"3.4.0\"},\"storage\":{\"files\":[{\"path\":\"/etc/creds\",\"contents\":{\"source\":\"http://169.254.169.254/latest/meta-data/iam\"}}]}}"}]`), []string{"spec.config[1].content"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := e.do(http.MethodPost, "/v1/clusters/"+tt.cluster+"/nodepools", tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status = %d %s, want 400", status, b)
			}
			if got := problemFields(t, b); !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v: %s", got, tt.want, b)
			}
		})
	}
	if keys, _ := e.pools.Keys(context.Background()); len(keys) != 0 {
		t.Errorf("invalid pools were stored: %v", keys)
	}
}

func TestNodePoolAPI_ClusterMustExistAndNotBeDeleting(t *testing.T) {
	e := start(t, nil)
	if status, b := e.do(http.MethodPost, "/v1/clusters/nope/nodepools", poolBody("workers", replace3)); status != http.StatusNotFound {
		t.Errorf("create in an unknown cluster = %d %s, want 404", status, b)
	}
	if status, b := e.do(http.MethodGet, "/v1/clusters/nope/nodepools", ""); status != http.StatusNotFound {
		t.Errorf("list of an unknown cluster = %d %s, want 404", status, b)
	}
	if status, b := e.do(http.MethodGet, "/v1/clusters/nope/nodepools/workers", ""); status != http.StatusNotFound {
		t.Errorf("get in an unknown cluster = %d %s, want 404", status, b)
	}
	e.putCluster("demo", "1.34.4")
	e.createPool("demo", poolBody("workers", replace3))
	if status, b := e.do(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("workers", replace3)); status != http.StatusConflict {
		t.Errorf("second create = %d %s, want 409", status, b)
	}
	e.deleteCluster("demo")
	if status, b := e.do(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("more", replace3)); status != http.StatusConflict {
		t.Errorf("create in a deleting cluster = %d %s, want 409", status, b)
	}
}

func TestNodePoolAPI_PatchKeepsTheHashUnlessARollingInputChanges(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	np := e.createPool("demo", poolBody("workers", replace3))
	hash := np.Status.ConfigHash

	scaled := e.patchPool("demo", "workers", `{"spec":{"replicas":5}}`)
	if scaled.Generation != 2 || *scaled.Spec.Replicas != 5 || scaled.Status.ConfigHash != hash {
		t.Errorf("after scaling: generation %d replicas %v hash %s", scaled.Generation, *scaled.Spec.Replicas, scaled.Status.ConfigHash)
	}
	relabeled := e.patchPool("demo", "workers", `{"nodeLabels":{"tier":"gold"},"taints":[{"key":"a","effect":"NoSchedule"}],"nodeDrainTimeout":"1m"}`)
	if relabeled.Generation != 3 || relabeled.Status.ConfigHash != hash {
		t.Errorf("labels, taints and a timeout changed the hash: %s → %s", hash, relabeled.Status.ConfigHash)
	}
	same := e.patchPool("demo", "workers", `{"spec":{"replicas":5}}`)
	if same.Generation != 3 {
		t.Errorf("a patch that changes nothing bumped the generation to %d", same.Generation)
	}
	configured := e.patchPool("demo", "workers", `{"spec":{"config":[{"name":"motd","content":"`+motd+`"}]}}`)
	if configured.Status.ConfigHash == hash || configured.Status.ConfigHash != ConfigHash(&configured.Spec) {
		t.Errorf("a config change kept the hash %s", hash)
	}
	autoscaled := e.patchPool("demo", "workers", `{"spec":{"replicas":null,"autoScaling":{"min":1,"max":4}}}`)
	if autoscaled.Spec.Replicas != nil || autoscaled.Spec.AutoScaling == nil {
		t.Errorf("switch to autoscaling: %+v", autoscaled.Spec)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.seen("io.hostplane.nodepool.updated", "demo/workers") }, "nodepool.updated never published")

	tests := []struct {
		name, body string
		status     int
		want       []string
	}{
		{"upgradeType is immutable", `{"spec":{"management":{"upgradeType":"InPlace"}}}`, http.StatusBadRequest, []string{"spec.autoScaling", "spec.management.upgradeType"}}, // the pool autoscales, which InPlace cannot
		{"platform is immutable", `{"spec":{"platform":{"type":"none"}}}`, http.StatusBadRequest, []string{"spec.platform.type"}},
		{"replicas next to autoScaling", `{"spec":{"replicas":2}}`, http.StatusBadRequest, []string{"spec.replicas", "spec.autoScaling"}},
		{"status cannot be patched", `{"status":{"replicas":9}}`, http.StatusBadRequest, []string{"status"}},
		{"unknown spec field", `{"spec":{"replicsa":2}}`, http.StatusBadRequest, []string{"spec.replicsa"}},
		{"release newer than the cluster", `{"spec":{"release":{"version":"1.35.0"}}}`, http.StatusBadRequest, []string{"spec.release.version"}},
		{"not an object", `[1]`, http.StatusBadRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := e.do(http.MethodPatch, "/v1/clusters/demo/nodepools/workers", tt.body)
			if status != tt.status {
				t.Fatalf("status = %d %s, want %d", status, b, tt.status)
			}
			if got := problemFields(t, b); !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v: %s", got, tt.want, b)
			}
		})
	}
	if status, b := e.do(http.MethodPatch, "/v1/clusters/demo/nodepools/nope", `{"replicas":1}`); status != http.StatusNotFound {
		t.Errorf("patch of an unknown pool = %d %s, want 404", status, b)
	}
}

// Without a management cluster there is nothing to take down: DELETE removes the key at once.
func TestNodePoolAPI_DeleteAnswers202ThenTheNodePoolIsGone(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.createPool("demo", poolBody("workers", replace3))
	status, b := e.do(http.MethodDelete, "/v1/clusters/demo/nodepools/workers", "")
	var np api.NodePool
	decode(t, b, &np)
	if status != http.StatusAccepted || np.DeletionTimestamp == nil {
		t.Fatalf("delete = %d %s", status, b)
	}
	if status, b := e.do(http.MethodPatch, "/v1/clusters/demo/nodepools/workers", `{"replicas":1}`); status != http.StatusConflict && status != http.StatusNotFound {
		t.Errorf("patch of a deleting pool = %d %s, want 409 (or 404 once gone)", status, b)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.getPool("demo", "workers") == nil }, "the pool never went away")
	testenv.Eventually(t, 10*time.Second, func() bool {
		return e.seen("io.hostplane.nodepool.deleting", "demo/workers") && e.seen("io.hostplane.nodepool.deleted", "demo/workers")
	}, "nodepool.deleting and nodepool.deleted never published")
}

// A full nodepools bucket (its limit lowered by an operator) refuses new pools with a 503
// that says why, while the pools it holds are still read and deleted.
func TestNodePoolAPI_AFullStoreRefusesNewPoolsButNotReadsOrDeletes(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.createPool("demo", poolBody("workers", replace3))
	ctx := context.Background()
	s, err := e.nats.JS.Stream(ctx, "KV_"+bus.BucketNodePools)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = int64(s.CachedInfo().State.Bytes) + 96<<10
	if _, err := e.nats.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var created []string
	var status int
	var b []byte
	for n := range 500 {
		name := "more-" + strconv.Itoa(n)
		if status, b = e.do(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody(name, replace3)); status != http.StatusAccepted {
			break
		}
		created = append(created, name)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(string(b), "no room") {
		t.Fatalf("after %d more pools: %d %s; want 503 saying the store has no room", len(created), status, b)
	}
	for _, name := range append([]string{"workers"}, created...) {
		if status, b := e.do(http.MethodGet, "/v1/clusters/demo/nodepools/"+name, ""); status != http.StatusOK {
			t.Fatalf("get %s of a full store: %d %s", name, status, b)
		}
		if status, b := e.do(http.MethodDelete, "/v1/clusters/demo/nodepools/"+name, ""); status != http.StatusAccepted {
			t.Fatalf("delete %s of a full store: %d %s", name, status, b)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		var list api.NodePoolList
		status, b := e.do(http.MethodGet, "/v1/clusters/demo/nodepools", "")
		decode(t, b, &list)
		return status == http.StatusOK && len(list.Items) == 0
	}, "the pools of a full store were never deleted")
}

func TestNodePools_OfADeletingClusterAreDeleted(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.createPool("demo", poolBody("a", replace3))
	e.createPool("demo", poolBody("b", replace3))
	e.deleteCluster("demo")
	if _, err := bus.NewPublisher(e.nats.JS, "clusterd").Publish(context.Background(), "demo", events.ResourceCluster, events.VerbClusterDeleting, "demo", nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		keys, err := e.pools.Keys(context.Background(), "demo.*")
		return err == nil && len(keys) == 0
	}, "the pools of a deleting cluster were never deleted")
}
