package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// The fault campaign's knobs: `make chaos` sets them for a long run; `make test` runs the
// short default. A failed run prints its seed; the same seed replays the same schedule.
const (
	EnvChaosSeed     = "HOSTPLANE_CHAOS_SEED"     // the schedule's seed (default: from the clock)
	EnvChaosFaults   = "HOSTPLANE_CHAOS_FAULTS"   // how many faults to inject (default 6)
	EnvChaosClusters = "HOSTPLANE_CHAOS_CLUSTERS" // how many clusters to drive (default 2)
)

// chaosOverride publishes NATS on a loopback port of the host, so the campaign can read the
// buckets as the admin identity when it checks that nothing is left behind.
const chaosOverride = `services:
  nats:
    ports: ["127.0.0.1:${HOSTPLANE_CHAOS_NATS_PORT:?}:4222"]
`

// chaosTargets are the containers a "kill" fault picks from: every daemon replica.
func chaosTargets() []string {
	out := []string{"componentd"}
	for _, d := range composeReplicated {
		out = append(out, d, d+"-2")
	}
	slices.Sort(out)
	return out
}

// fault is one fault the campaign injected.
type fault struct {
	at     time.Duration // since the campaign began
	target string        // the compose service killed with SIGKILL
	down   time.Duration // how long it stayed down before it was started again
	err    error
}

func (f fault) String() string {
	s := fmt.Sprintf("+%5.1fs kill -9 %-12s down %.1fs", f.at.Seconds(), f.target, f.down.Seconds())
	if f.err != nil {
		s += " (" + f.err.Error() + ")"
	}
	return s
}

// campaign is one seeded fault campaign against a compose stack.
type campaign struct {
	t     *testing.T
	s     *composeStack
	c     *client
	seed  uint64
	start time.Time
	netns string // the gateway container's network namespace: the stack's loopback

	mu       sync.Mutex
	faults   []fault
	accepted []string // the requests the API accepted
	checks   []string // the invariants checked
}

// TestCompose_FaultCampaign drives clusters through create, node pool create and scale,
// upgrade and delete on deploy/compose while a seeded schedule kills random daemon replicas,
// one of the three NATS servers and the management apiserver with SIGKILL, each started again
// after a seeded pause (as a restart policy would; a "lost" NATS server after 15–25 s). When the faults stop, every operation must finish and the
// invariants hold: the accepted requests each took effect once (one cluster per create,
// the scaled replica count and no more, the upgraded version), the guest clusters' data
// written before the faults is intact, no machine was launched twice, and once everything is
// deleted no process, listening port, file, local-cloud machine, Cluster API object or KV key
// of any cluster is left. It prints the seed, the faults and the invariants it checked.
func TestCompose_FaultCampaign(t *testing.T) {
	if os.Getenv(EnvComposeTest) == "" {
		t.Skip("needs the images and Docker: run `make compose-test` or `make chaos`")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the campaign enters the stack's network namespace with nsenter: run it as root")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(EnvChaosSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", EnvChaosSeed, v, err)
		}
	}
	nFaults, nClusters := testenv.EnvInt(t, EnvChaosFaults, 6, 0), testenv.EnvInt(t, EnvChaosClusters, 2, 1)
	t.Logf("fault campaign: seed %d, %d faults, %d clusters (replay: %s=%d)", seed, nFaults, nClusters, EnvChaosSeed, seed)

	override := filepath.Join(t.TempDir(), "chaos.yml")
	if err := os.WriteFile(override, []byte(chaosOverride), 0o600); err != nil {
		t.Fatal(err)
	}
	natsPort := freePort(t)
	t.Setenv("HOSTPLANE_CHAOS_NATS_PORT", strconv.Itoa(natsPort))
	s, c := startCompose(t, "hpchaos", override)
	k := &campaign{t: t, s: s, c: c, seed: seed, start: time.Now()}
	k.netns = "/proc/" + k.inspect("gateway", "{{.State.Pid}}") + "/ns/net"

	// The schedule: one goroutine injects the faults while the test drives the clusters.
	faultsDone := make(chan struct{})
	go k.inject(rand.New(rand.NewPCG(seed, 1)), nFaults, faultsDone)
	defer func() { <-faultsDone }() // a failed test still waits, so every container is started again

	versions := release.Versions()
	if len(versions) < 2 {
		t.Fatalf("the release catalogue has %v: the campaign upgrades from one to the next", versions)
	}
	from, to := versions[len(versions)-2], versions[len(versions)-1]
	// Rounds of work until the schedule is through: each round drives nClusters new
	// clusters; the faults land wherever the work is.
	watch := k.watchMachines()
	var names, kept []string
	for round := 0; ; round++ {
		began := time.Now()
		r, keep := k.round(round, nClusters, from, to)
		names, kept = append(names, r...), append(kept, keep...)
		t.Logf("round %d: %d clusters created, pooled, scaled/upgraded or deleted in %.1fs", round, nClusters, time.Since(began).Seconds())
		select {
		case <-faultsDone:
		default:
			continue
		}
		break
	}
	k.logFaults()

	// The faults are over: every container runs again and every daemon is ready.
	healing := time.Now()
	s.must("up", "-d")
	c.waitReady(3*time.Minute, "the daemons never became ready again after the faults")
	for _, n := range kept {
		k.waitPool(n, "workers", 2, 4*time.Minute)
		k.waitUpgraded(n, to)
	}
	t.Logf("converged %.1fs after the last fault", time.Since(healing).Seconds())
	watch.stop()
	k.check("no pool ever had more live machines than its replicas (max %d)", watch.max <= 2, watch.max)
	slices.Sort(kept)
	k.checkClusters(kept)
	for _, n := range kept {
		k.checkCluster(n, to, 2)
	}

	// Delete what is left; nothing of any cluster may remain.
	endpoints := map[string]int{}
	for _, n := range kept {
		cl, _ := c.cluster(n)
		if ep := cl.Status.ControlPlaneEndpoint; ep != nil {
			endpoints[n] = ep.Port
		}
		k.accept("DELETE", "/v1/clusters/"+n, "")
	}
	for _, n := range kept {
		k.waitGone(n)
	}
	k.checkNothingLeft(names, endpoints, natsPort)

	t.Logf("fault campaign: seed %d: %d faults injected, %d requests accepted, %d invariants checked, 0 violated",
		seed, len(k.faults), len(k.accepted), len(k.checks))
	for _, c := range k.checks {
		t.Logf("  ok: %s", c)
	}
}

// round drives n new clusters (chaos<round>-<i>) while the faults go on: each is created at
// release from, gets data written into it and a 1-node pool. Even ones are then scaled to 2
// and upgraded to release to, and kept; odd ones have their pool and then the cluster
// deleted at once. It returns the round's clusters and those it kept.
func (k *campaign) round(round, n int, from, to string) (names, kept []string) {
	k.t.Helper()
	for i := range n {
		names = append(names, "chaos"+strconv.Itoa(round)+"-"+strconv.Itoa(i))
	}
	keep := func(i int) bool { return i%2 == 0 }
	for _, n := range names {
		k.accept("POST", "/v1/clusters", `{"name":"`+n+`","spec":{"release":{"version":"`+from+`"}}}`)
	}
	for _, n := range names {
		k.c.waitCondition(n, api.ConditionAvailable, api.ConditionTrue, 6*time.Minute)
		k.guestWrite(n)
		k.accept("POST", "/v1/clusters/"+n+"/nodepools", `{"name":"workers","spec":{"replicas":1,"release":{"version":"`+from+`"},"management":{"upgradeType":"Replace"}}}`)
	}
	for i, n := range names {
		k.waitPool(n, "workers", 1, 6*time.Minute)
		if keep(i) {
			k.accept("PATCH", "/v1/clusters/"+n+"/nodepools/workers", `{"spec":{"replicas":2}}`)
			k.accept("PATCH", "/v1/clusters/"+n, `{"spec":{"release":{"version":"`+to+`"}}}`)
		} else {
			k.accept("DELETE", "/v1/clusters/"+n+"/nodepools/workers", "")
			k.accept("DELETE", "/v1/clusters/"+n, "")
		}
	}
	for i, n := range names {
		if keep(i) {
			kept = append(kept, n)
			k.waitPool(n, "workers", 2, 6*time.Minute)
			k.waitUpgraded(n, to)
		} else {
			k.waitGone(n)
		}
	}
	return names, kept
}

// natsServers are deploy/compose's NATS servers: one JetStream cluster, every stream and
// bucket on all three.
var natsServers = []string{"nats", "nats-2", "nats-3"}

// The kinds of fault, drawn from ten: a daemon replica killed (six in ten), a NATS server
// restarted, a NATS server lost for a while, the management cluster restarted (two in ten).
const (
	faultReplica    = 0
	faultNATS       = 6
	faultNATSLost   = 7
	faultManagement = 8
)

// inject kills n seeded targets, one at a time, at seeded intervals, each started again after
// a seeded pause: a daemon replica (most often), one NATS server, or the management apiserver
// (0.5–3.5 s down, a restart); or one NATS server lost for 15–25 s, while the other two carry
// the cluster and the work goes on. The first four are one of each kind, in a seeded order,
// so even a short campaign has every kind.
func (k *campaign) inject(rng *rand.Rand, n int, done chan<- struct{}) {
	defer close(done)
	targets := chaosTargets()
	kinds := []int{faultReplica, faultNATS, faultNATSLost, faultManagement}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i := range n {
		time.Sleep(time.Duration(3000+rng.IntN(7000)) * time.Millisecond)
		kind := rng.IntN(10)
		if i < len(kinds) {
			kind = kinds[i]
		}
		target, down := "", time.Duration(500+rng.IntN(3000))*time.Millisecond
		switch {
		case kind < faultNATS:
			target = targets[rng.IntN(len(targets))]
		case kind == faultNATS:
			target = natsServers[rng.IntN(len(natsServers))]
		case kind == faultNATSLost:
			target, down = natsServers[rng.IntN(len(natsServers))], time.Duration(15000+rng.IntN(10000))*time.Millisecond
		default:
			target = "management"
		}
		f := fault{at: time.Since(k.start), target: target, down: down}
		if out, err := k.s.run("kill", "-s", "SIGKILL", target); err != nil {
			f.err = fmt.Errorf("kill: %v: %s", err, bytes.TrimSpace(out))
		}
		time.Sleep(f.down)
		if out, err := k.s.run("start", target); err != nil {
			f.err = errors.Join(f.err, fmt.Errorf("start: %v: %s", err, bytes.TrimSpace(out)))
		}
		k.mu.Lock()
		k.faults = append(k.faults, f)
		k.mu.Unlock()
	}
}

func (k *campaign) logFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.faults {
		k.t.Logf("fault %s", f)
		if f.err != nil {
			k.t.Errorf("the fault could not be injected as scheduled: %s", f)
		}
	}
}

// pollCluster is poll for a wait on one cluster: a failure also prints the log lines that
// name it (composeStack.setFocus).
func (k *campaign) pollCluster(cluster string, timeout time.Duration, cond func() bool, format string, args ...any) {
	k.t.Helper()
	k.s.setFocus(cluster)
	k.poll(timeout, cond, format, args...)
	k.s.setFocus("") // not reached when poll fails: the failure keeps the focus
}

// poll calls cond every half second until it holds, failing the test after timeout.
func (k *campaign) poll(timeout time.Duration, cond func() bool, format string, args ...any) {
	k.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		k.t.Fatalf("after %v: "+format, append([]any{timeout}, args...)...)
	}
}

// accept sends a request until the API accepts it and records it. While a fault lasts the
// answer may be a 5xx or none; a create then answered 409, or a delete answered 404, means an
// earlier try took effect although its answer was lost.
func (k *campaign) accept(method, path, body string) {
	k.t.Helper()
	var in []byte
	if body != "" {
		in = []byte(body)
	}
	var (
		code    int
		out     []byte
		unknown bool // an earlier try may have taken effect
	)
	k.poll(4*time.Minute, func() bool {
		var err error
		code, out, err = k.c.api.Raw(context.Background(), method, path, in)
		switch {
		case err != nil || code >= 500:
			unknown = true
			return false
		case code < 300,
			unknown && method == http.MethodPost && code == http.StatusConflict,
			unknown && method == http.MethodDelete && code == http.StatusNotFound:
			return true
		}
		k.t.Fatalf("%s %s %s: %d %s", method, path, body, code, out)
		return false
	}, "%s %s was never accepted; last answer %d %s", method, path, code, out)
	k.mu.Lock()
	k.accepted = append(k.accepted, method+" "+path)
	k.mu.Unlock()
}

// check records an invariant, failing the test if it does not hold.
func (k *campaign) check(format string, ok bool, args ...any) {
	k.t.Helper()
	if !ok {
		k.t.Fatalf("invariant violated: "+format, args...)
	}
	k.held(format, args...)
}

// held records an invariant already seen to hold (by a poll that fails the test otherwise).
func (k *campaign) held(format string, args ...any) {
	k.checks = append(k.checks, fmt.Sprintf(format, args...))
}

func (k *campaign) waitUpgraded(cluster, version string) {
	k.t.Helper()
	var cl api.Cluster
	k.pollCluster(cluster, 6*time.Minute, func() bool {
		cl, _ = k.c.cluster(cluster)
		v := cl.Status.Version
		return v != nil && len(v.History) > 0 && v.History[0].Version == version &&
			v.History[0].State == api.UpdateStateCompleted && cl.Status.Conditions.IsTrue(api.ConditionAvailable)
	}, "cluster %s never finished its upgrade to %s: %s", cluster, version, lazyJSON{&cl})
}

// waitPool waits until the pool has want ready, updated machines, through answers that fail
// while a fault lasts.
func (k *campaign) waitPool(cluster, pool string, want int32, timeout time.Duration) {
	k.t.Helper()
	var np api.NodePool
	k.pollCluster(cluster, timeout, func() bool {
		np, _ = k.c.nodePool(cluster, pool)
		return poolSettled(np, want)
	}, "node pool %s/%s never had %d ready, updated machines: %s", cluster, pool, want, lazyJSON{&np})
}

func (k *campaign) waitGone(cluster string) {
	k.t.Helper()
	var cl api.Cluster
	k.pollCluster(cluster, 6*time.Minute, func() bool {
		var code int
		cl, code = k.c.cluster(cluster)
		return code == http.StatusNotFound
	}, "cluster %s was never deleted: %s", cluster, lazyJSON{&cl})
}

// chaosData is what the campaign writes into each guest cluster before the faults and reads
// back after them.
func (k *campaign) chaosData(cluster string) string {
	return cluster + "-" + strconv.FormatUint(k.seed, 10)
}

// guestWrite writes a ConfigMap into the guest cluster, retrying through the faults.
func (k *campaign) guestWrite(cluster string) {
	k.t.Helper()
	var out string
	k.pollCluster(cluster, 4*time.Minute, func() bool {
		var err error
		out, err = k.guestKubectl(cluster, "create", "configmap", "chaos", "--from-literal=data="+k.chaosData(cluster))
		return err == nil || strings.Contains(out, "AlreadyExists")
	}, "cluster %s: the ConfigMap was never written: %s", cluster, lazyString{&out})
}

// guestKubectl runs kubectl against the guest cluster with the kubeconfig the API hands
// out, inside the stack's network namespace where its endpoint listens.
func (k *campaign) guestKubectl(cluster string, args ...string) (string, error) {
	code, kc, err := k.c.api.Raw(context.Background(), "GET", "/v1/clusters/"+cluster+"/kubeconfig", nil)
	if err != nil || code != http.StatusOK {
		return fmt.Sprintf("kubeconfig: %d %s", code, kc), fmt.Errorf("no kubeconfig: %v", err)
	}
	return k.kubectl(kc, args...)
}

func (k *campaign) kubectl(kubeconfig []byte, args ...string) (string, error) {
	path := filepath.Join(k.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	return k.inNetns("kubectl", append([]string{"--kubeconfig", path, "--request-timeout", "10s"}, args...)...)
}

// inNetns runs a host program in the stack's network namespace.
func (k *campaign) inNetns(name string, args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"--net=" + k.netns, name}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// inspect formats a compose service's container with docker inspect.
func (k *campaign) inspect(service, format string) string {
	k.t.Helper()
	id := k.containerID(service)
	out, err := exec.Command("docker", "inspect", "-f", format, id).CombinedOutput()
	if err != nil {
		k.t.Fatalf("docker inspect %s: %v: %s", service, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (k *campaign) containerID(service string) string {
	k.t.Helper()
	out, err := k.s.run("ps", "-aq", service)
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" || strings.Contains(id, "\n") {
		k.t.Fatalf("the container of %s: %v: %q", service, err, out)
	}
	return id
}

// cloudMachine is what the campaign reads of a local-cloud machine.
type cloudMachine struct {
	Cluster  string `json:"cluster"`
	Name     string `json:"name"`
	NodePool string `json:"nodePool"`
	State    string `json:"state"`
	NodeName string `json:"nodeName"`
	Boots    int    `json:"boots"`
}

// cloudMachines lists the local cloud's machines (of every cluster), from inside the stack.
func (k *campaign) cloudMachines() []cloudMachine {
	k.t.Helper()
	// The cloud answers only the token infrad holds (nats-creds made it).
	token, err := k.copyOut("localcloud", "/nats-creds/localcloud.token")
	if err != nil {
		k.t.Fatalf("the local cloud's token: %v", err)
	}
	out, err := k.inNetns("curl", "-sSf", "--max-time", "10", "-H", "Authorization: Bearer "+strings.TrimSpace(string(token)), "http://127.0.0.1:8090/machines")
	if err != nil {
		k.t.Fatalf("the local cloud's machines: %v: %s", err, out)
	}
	var list struct {
		Items []cloudMachine `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		k.t.Fatalf("the local cloud's machines: %v: %s", err, out)
	}
	return list.Items
}

// machineCeiling follows the largest number of live machines any pool had at once.
type machineCeiling struct {
	max  int
	quit chan struct{}
	done chan struct{}
}

func (w *machineCeiling) stop() {
	close(w.quit)
	<-w.done
}

// watchMachines polls every cluster's machines through the API for the whole campaign. A
// machine launched twice (two replicas acting on one Machine, or a Machine created again
// after a restart) shows as a pool with more live machines than its replicas.
func (k *campaign) watchMachines() *machineCeiling {
	w := &machineCeiling{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var list api.ClusterList
			if code, b, err := k.c.api.Raw(context.Background(), "GET", "/v1/clusters", nil); err == nil && code == http.StatusOK && json.Unmarshal(b, &list) == nil {
				for _, cl := range list.Items {
					var ms api.MachineList
					code, b, err := k.c.api.Raw(context.Background(), "GET", "/v1/clusters/"+cl.Name+"/machines", nil)
					if err != nil || code != http.StatusOK || json.Unmarshal(b, &ms) != nil {
						continue
					}
					live := map[string]int{}
					for _, m := range ms.Items {
						if m.Phase != "Deleting" && m.Phase != "Deleted" && m.Phase != "Failed" {
							live[m.NodePool]++
						}
					}
					for _, n := range live {
						w.max = max(w.max, n)
					}
				}
			}
			select {
			case <-w.quit:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return w
}

// checkClusters: the API lists exactly the clusters that were created and not deleted.
func (k *campaign) checkClusters(want []string) {
	k.t.Helper()
	var list api.ClusterList
	if code, body := k.c.do("GET", "/v1/clusters", "", &list); code != http.StatusOK {
		k.t.Fatalf("list clusters: %d %s", code, body)
	}
	var got []string
	for _, cl := range list.Items {
		got = append(got, cl.Name)
	}
	slices.Sort(got)
	k.check("the clusters are exactly %v (got %v): each create took effect once, each delete took", slices.Equal(got, want), want, got)
}

// checkCluster checks one surviving cluster after the faults.
func (k *campaign) checkCluster(name, version string, replicas int) {
	k.t.Helper()
	cl, _ := k.c.cluster(name)
	k.check("%s is Available at %s", cl.Status.Conditions.IsTrue(api.ConditionAvailable) && cl.Spec.Release.Version == version, name, version)

	var comps api.ComponentList
	if code, body := k.c.do("GET", "/v1/clusters/"+name+"/components", "", &comps); code != http.StatusOK {
		k.t.Fatalf("components: %d %s", code, body)
	}
	var compNames []string
	for _, c := range comps.Items {
		compNames = append(compNames, c.Name)
	}
	k.check("%s has each component once: %v", len(compNames) > 0 && !duplicated(compNames), name, compNames)

	np, _ := k.c.nodePool(name, "workers")
	k.check("%s/workers has spec.replicas %d: the scale took effect once", np.Spec.Replicas != nil && int(*np.Spec.Replicas) == replicas, name, replicas)
	ms := k.c.poolMachines(name, "workers")
	var machineNames, nodeNames []string
	for _, m := range ms {
		machineNames = append(machineNames, m.Name)
		nodeNames = append(nodeNames, m.NodeName)
	}
	slices.Sort(machineNames)
	slices.Sort(nodeNames)
	k.check("%s/workers has %d machines, each once: %v", len(ms) == replicas && !duplicated(machineNames), name, replicas, machineNames)

	var inCloud []string
	for _, m := range k.cloudMachines() {
		if m.Cluster == name {
			inCloud = append(inCloud, m.Name)
		}
	}
	slices.Sort(inCloud)
	k.check("%s's local-cloud machines are exactly its Cluster API machines %v (cloud: %v): none launched twice, none orphaned",
		slices.Equal(inCloud, machineNames), name, machineNames, inCloud)

	out, err := k.guestKubectl(name, "get", "configmap", "chaos", "-o", "jsonpath={.data.data}")
	k.check("%s still holds the ConfigMap written before the faults (%q)", err == nil && out == k.chaosData(name), name, out)

	// A Node whose machine was removed before Cluster API recorded it (a machine remediated
	// or scaled away while it was still joining) is left to the guest's node lifecycle: it
	// turns NotReady once its heartbeats lapse (node-monitor-grace-period, 50 s) but is not
	// deleted, as no cloud controller manager runs for the local platform yet. So the Ready
	// nodes converge on the machines' nodes, and ghosts are reported.
	var ready, ghosts []string
	k.poll(2*time.Minute, func() bool {
		out, err := k.guestKubectl(name, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return false
		}
		ready, ghosts = nil, nil
		for line := range strings.Lines(out) {
			n, st, _ := strings.Cut(strings.TrimSpace(line), "=")
			switch {
			case !slices.Contains(nodeNames, n):
				ghosts = append(ghosts, n+" (Ready="+st+")")
			case st == "True":
				ready = append(ready, n)
			}
		}
		slices.Sort(ready)
		return slices.Equal(ready, nodeNames) && !slices.ContainsFunc(ghosts, func(g string) bool { return strings.HasSuffix(g, "=True)") })
	}, "invariant violated: %s's Ready nodes are not its machines' nodes %v (Ready: %v; nodes of no machine: %v)", name, nodeNames, ready, ghosts)
	k.held("%s's Ready nodes are its machines' nodes %v", name, nodeNames)
	if len(ghosts) > 0 {
		k.t.Logf("%s: Nodes of removed machines left NotReady in the guest: %v", name, ghosts)
	}
}

func duplicated(names []string) bool {
	sorted := slices.Sorted(slices.Values(names))
	return len(slices.Compact(sorted)) != len(names)
}

// controlPlaneBinaries are the programs componentd runs for a cluster.
var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "hostplane-karpenter"}

// checkNothingLeft checks that no trace of the deleted clusters is left anywhere.
func (k *campaign) checkNothingLeft(names []string, endpoints map[string]int, natsPort int) {
	k.t.Helper()
	// Processes: componentd's container runs nothing but componentd.
	top, err := exec.Command("docker", "top", k.containerID("componentd"), "-o", "pid,args").CombinedOutput()
	if err != nil {
		k.t.Fatalf("docker top componentd: %v: %s", err, top)
	}
	var left []string
	for line := range strings.Lines(string(top)) {
		for _, b := range controlPlaneBinaries {
			if strings.Contains(line, "/"+b+" ") {
				left = append(left, strings.TrimSpace(line))
			}
		}
	}
	k.check("no control-plane process runs (%v)", len(left) == 0, left)

	// Ports: no endpoint of a deleted cluster listens.
	ss, err := k.inNetns("ss", "-Htln")
	if err != nil {
		k.t.Fatalf("ss: %v: %s", err, ss)
	}
	for n, port := range endpoints {
		k.check("%s's endpoint port %d is closed", !strings.Contains(ss, ":"+strconv.Itoa(port)+" "), n, port)
	}

	// Machines: the local cloud has none.
	k.check("the local cloud runs no machine (%v)", len(k.cloudMachines()) == 0, k.cloudMachines())
	// ... and answers nobody without infrad's token (every container shares this loopback).
	code, err := k.inNetns("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "http://127.0.0.1:8090/machines")
	k.check("the local cloud refuses a request without its token (HTTP %s, %v)", err == nil && code == "401", code, err)

	// Cluster API: no object of any cluster in the management apiserver.
	kc, err := k.copyOut("management", "/data/admin.kubeconfig")
	if err != nil {
		k.t.Fatal(err)
	}
	objs, err := k.kubectl(kc, "get", "-A", "-o", "name",
		"clusters.cluster.x-k8s.io,machinedeployments.cluster.x-k8s.io,machinesets.cluster.x-k8s.io,machines.cluster.x-k8s.io,"+
			"machinehealthchecks.cluster.x-k8s.io,localclusters.infrastructure.hostplane.dev,localmachines.infrastructure.hostplane.dev,"+
			"localmachinetemplates.infrastructure.hostplane.dev")
	k.check("no Cluster API object is left in the management cluster (%q)", err == nil && strings.TrimSpace(objs) == "", objs)

	// Files: no daemon keeps a directory of a deleted cluster.
	for _, d := range []string{"clusterd", "componentd", "pkid", "infrad"} {
		for _, n := range names {
			_, err := k.copyOut(d, "/data/clusters/"+n)
			k.check("%s keeps no files of %s", err != nil, d, n)
		}
	}

	// KV: no key of a deleted cluster in any daemon's bucket.
	seed, err := k.copyOut("nats-creds", "/data/"+natsauth.Admin+natsauth.SeedExt)
	if err != nil {
		k.t.Fatal(err)
	}
	ca, err := k.copyOut("nats-creds", "/data/tls/ca.crt")
	if err != nil {
		k.t.Fatal(err)
	}
	dir := k.t.TempDir()
	seedFile, caFile := filepath.Join(dir, "admin.nk"), filepath.Join(dir, "ca.crt")
	if err := errors.Join(os.WriteFile(seedFile, seed, 0o600), os.WriteFile(caFile, ca, 0o600)); err != nil {
		k.t.Fatal(err)
	}
	opts, err := natsauth.ClientOptions(natsauth.Admin, seedFile, natsauth.TLS{CAFile: caFile})
	if err != nil {
		k.t.Fatal(err)
	}
	nc, err := bus.Connect(k.t.Context(), "tls://127.0.0.1:"+strconv.Itoa(natsPort), "hostplane-chaos", nil, opts...)
	if err != nil {
		k.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, b := range []string{bus.BucketClusters, bus.BucketInfra, bus.BucketPKI, bus.BucketControlPlane, bus.BucketNodePools, bus.BucketIgnition} {
		kv, err := js.KeyValue(k.t.Context(), b)
		if err != nil {
			k.t.Fatal(err)
		}
		var keys []string
		if lister, err := kv.ListKeys(k.t.Context()); err == nil {
			for key := range lister.Keys() {
				if cl, _, _ := strings.Cut(key, "."); slices.Contains(names, cl) {
					keys = append(keys, key)
				}
			}
		} else if !errors.Is(err, jetstream.ErrNoKeysFound) {
			k.t.Fatal(err)
		}
		k.check("KV bucket %s holds no key of %v (%v)", len(keys) == 0, b, names, keys)
	}
}

// copyOut reads one file of a compose service's container (running or not) with docker cp;
// a directory comes back as its tar stream. A path that does not exist is an error.
func (k *campaign) copyOut(service, path string) ([]byte, error) {
	k.t.Helper()
	cmd := exec.Command("docker", "cp", k.containerID(service)+":"+path, "-")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("docker cp %s:%s: %v: %s", service, path, err, bytes.TrimSpace(errOut.Bytes()))
	}
	tr := tar.NewReader(&out)
	h, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("docker cp %s:%s: %w", service, path, err)
	}
	if h.Typeflag == tar.TypeDir {
		return out.Bytes(), nil
	}
	return io.ReadAll(tr)
}

// lazyString formats the string it points to when the message is formatted (after the
// poll), not when the poll is called.
type lazyString struct{ s *string }

func (l lazyString) String() string { return *l.s }
