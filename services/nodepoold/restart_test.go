package nodepoold

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/hostplane/hostplane/pkg/testenv"
)

// A management cluster that restarts several times in a row (a crash loop, a node reboot
// while it is slow to start) must not make Cluster API create a pool's Machines twice: a
// pool scaled right after the last restart gets exactly the Machines it asks for.
func TestNodePool_ManagementRestartsInARow_NoMachineCreatedTwice(t *testing.T) {
	// Its own log at info, kept aside and printed after the failure's message (CI keeps only
	// the start of a failed test's output), so a failure shows when the manager was built
	// again.
	var logs testenv.SyncBuffer
	ce := startCAPI(t, "demo", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nodepoold's log (Cluster API's controller start-up lines left out):\n%s", withoutStartup(logs.String()))
		}
	})
	np := ce.createPool("demo", poolBody("workers", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`))
	ce.putIgnition("demo", "workers", np.Status.ConfigHash, "token-one")
	testenv.Eventually(t, time.Minute, func() bool { return len(ce.machines("workers")) == 1 }, "the pool never got its Machine")
	first := ce.machines("workers")[0].Name

	const restarts = 4
	for i := range restarts {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		err := ce.mgmt.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restart %d of the management cluster: %v", i+1, err)
		}
		time.Sleep(time.Second)
	}

	ce.patchPool("demo", "workers", `{"spec":{"replicas":3}}`)
	// Every Machine the pool ever had, each with where it came from (a failure then tells a
	// duplicate from a replacement): until the scale is done, however long a loaded machine
	// takes, then for long after any stale cache would have caught up (client-go's re-list
	// backoff is at most 30 s).
	seen := map[string]string{first: "the first"}
	look := func() int {
		ms, err := listMachines(t.Context(), ce.kube, "demo", "workers")
		if err != nil {
			t.Logf("list Machines: %v", err)
		}
		for _, m := range ms {
			if _, ok := seen[m.Name]; !ok {
				seen[m.Name] = machineOrigin(m)
			}
		}
		return len(ms)
	}
	testenv.Eventually(t, 2*time.Minute, func() bool { return look() >= 3 }, "the pool never got its 3 Machines: %v", seen)
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		look()
	}
	ms := ce.machines("workers")
	if len(ms) != 3 || len(seen) != 3 {
		t.Fatalf("after %d restarts and a scale to 3: %d Machines now (%v), %d ever (%v); want 3 and 3",
			restarts, len(ms), names(ms), len(seen), seen)
	}
	if got := ce.getPool("demo", "workers").Spec.Replicas; got == nil || *got != 3 {
		t.Errorf("pool replicas = %v, want 3", got)
	}
}

// machineOrigin says which MachineSet made m and when.
func machineOrigin(m clusterv1.Machine) string {
	owner := "no owner"
	for _, ref := range m.OwnerReferences {
		owner = ref.Kind + " " + ref.Name
	}
	return fmt.Sprintf("%s, created %s", owner, m.CreationTimestamp.Format(time.TimeOnly))
}

// withoutStartup drops controller-runtime's lines about starting sources, controllers and
// workers (tens per manager build) from log.
func withoutStartup(log string) string {
	var b strings.Builder
	for line := range strings.Lines(log) {
		if strings.Contains(line, `msg="Starting `) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

func names(ms []clusterv1.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
