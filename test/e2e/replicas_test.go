package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// daemonNames are the six daemons, each of which runs as two replicas in the test below.
var daemonNames = []string{"clusterd", "infrad", "pkid", "componentd", "nodepoold", "ignitiond"}

// stopEveryLeader stops the leading replica of every daemon (as a SIGTERM of that pod
// would); the standby takes over and the stopped one comes back as the new standby.
func stopEveryLeader(t *testing.T, s *dev.Stack, during string) {
	t.Helper()
	for _, d := range daemonNames {
		var i int
		testenv.Eventually(t, 30*time.Second, func() bool {
			i = s.StopLeader(d)
			return i >= 0
		}, "no replica of %s leads %s", d, during)
		t.Logf("%s: stopped %s's leading replica %d", during, d, i)
	}
}

// Two replicas of every daemon; the leader of each is stopped mid-create of a cluster,
// mid-create of its node pool and mid-rollout of that pool. Every operation finishes on the
// replicas that take over, and none happens twice: the pool's machines are created once, the
// rollout replaces each once, and deleting the cluster leaves nothing.
func TestReplicas_TwoOfEveryDaemon_LeadersStoppedMidCreateAndMidRollout_EverythingFinishesOnce(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.Replicas = 2 })
	t.Cleanup(func() { s.Stop(context.Background()) })
	testenv.Eventually(t, time.Minute, func() bool { return s.Ready(t.Context()) == nil }, "the replicated stack never became ready")

	const cl = "replicated"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	stopEveryLeader(t, s, "mid-create of the cluster")
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)

	w := c.watchMachines(cl, "workers")
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":2,
		"release":{"version":"`+newRelease+`"},
		"management":{"upgradeType":"Replace","replace":{"strategy":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}},
		"nodeDrainTimeout":"20s"}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	// Mid-create: its first machine exists, the pool is not Ready yet.
	testenv.Eventually(t, poolReady, func() bool { return len(c.poolMachines(cl, "workers")) > 0 }, "no machine of the pool was ever made")
	stopEveryLeader(t, s, "mid-create of the node pool")
	np := c.waitPoolReady(cl, "workers", 2, poolReady)
	seen, _ := w.finish()
	if len(seen) != 2 {
		t.Errorf("machines created for a pool of 2 = %v, want 2: none made twice by two replicas", seen)
	}
	first := machineNames(c.poolMachines(cl, "workers"))

	hashBefore := np.Status.ConfigHash
	w = c.watchMachines(cl, "workers")
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"config": []api.ConfigDocument{{Name: "motd", Content: motdConfig}}}})
	if code, body := c.do("PATCH", "/v1/clusters/"+cl+"/nodepools/workers", string(patch), nil); code != http.StatusOK {
		t.Fatalf("config change: %d %s", code, body)
	}
	// Mid-rollout: the first replacement machine exists.
	testenv.Eventually(t, poolRollout, func() bool {
		for _, m := range c.poolMachines(cl, "workers") {
			if !slices.Contains(first, m.Name) {
				return true
			}
		}
		return false
	}, "the rollout never started")
	stopEveryLeader(t, s, "mid-rollout")
	c.waitRolledOut(cl, "workers", hashBefore, first, 2)
	seen, maxLive := w.finish()
	if len(seen) != 4 {
		t.Errorf("machines seen during the rollout = %v (%d), want the 2 old and 2 new: each replaced exactly once", seen, len(seen))
	}
	if maxLive > 3 {
		t.Errorf("%d machines at once during the rollout, want at most 2 + maxSurge 1", maxLive)
	}

	deleteCluster(t, s, c, cl, 4*time.Minute)
}
