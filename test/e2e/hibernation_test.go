package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/localcloud"
)

// hibernateWait bounds stopping or starting a control plane and its machines.
const hibernateWait = 2 * time.Minute

// cloudMachines lists the local cloud's machines of the cluster as the cloud itself sees them.
func cloudMachines(t *testing.T, s *dev.Stack, cluster string) []localcloud.MachineStatus {
	t.Helper()
	cl, err := localcloud.NewClient(s.Cloud.URL())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cl.List(ctx(t), cluster)
	if err != nil {
		t.Fatalf("list the local cloud's machines: %v", err)
	}
	return ms
}

// waitHibernated waits for Hibernated=True and checks what a user would notice: nothing of
// the cluster runs, its machines are powered off, and it says why it hibernates.
func waitHibernated(t *testing.T, s *dev.Stack, c *client, name, reason string) api.Cluster {
	t.Helper()
	cl := c.waitCondition(name, api.ConditionHibernated, api.ConditionTrue, hibernateWait)
	if h, _ := cl.Status.Conditions.Get(api.ConditionHibernated); h.Reason != reason {
		t.Errorf("Hibernated reason %q, want %q: %s", h.Reason, reason, lazyJSON{h})
	}
	if a, _ := cl.Status.Conditions.Get(api.ConditionAvailable); a.Status != api.ConditionFalse || a.Reason != api.ReasonHibernated {
		t.Errorf("a hibernated cluster says Available %s/%s: %s", a.Status, a.Reason, a.Message)
	}
	if procs := processesMentioning(c.dataDir, filepath.Join("clusters", name)); len(procs) > 0 {
		t.Errorf("hibernated, but processes of %s run: %v", name, procs)
	}
	for _, m := range cloudMachines(t, s, name) {
		if m.State != localcloud.StateStopped || !m.PoweredOff {
			t.Errorf("hibernated, but machine %s is %s (powered off %v)", m.Name, m.State, m.PoweredOff)
		}
	}
	// Nor do the daemons keep watching its stopped kube-apiserver (each test's stack holds
	// this one cluster).
	for _, watch := range []string{"hostplane_pkid_csr_approvers", "hostplane_nodepoold_guest_node_informers"} {
		var v float64
		testenv.Eventually(t, 30*time.Second, func() bool {
			v = unlabelledValue(t, c, watch)
			return v == 0
		}, "hibernated, but %s is %v", watch, lazyJSON{&v})
	}
	return cl
}

// A hibernated cluster keeps its data and its Nodes: hibernate it, check nothing of it
// runs (across a restart of every daemon), then a plain GET on the same kubeconfig wakes
// it and returns the ConfigMap written before, and the same Node is Ready again. Deleting
// it while it hibernates leaves nothing behind.
func TestHibernation_StopsEverythingAndResumesTheSameClusterAndNodes(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	dir := t.TempDir()
	s, c := startStackAt(t, dir)
	stop := sync.OnceFunc(func() { s.Stop(context.Background()) })
	t.Cleanup(stop)
	const name = "sleepy"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+name+`","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	cl := c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	endpoint := net.JoinHostPort(cl.Status.ControlPlaneEndpoint.Host, strconv.Itoa(cl.Status.ControlPlaneEndpoint.Port))
	if code, body := c.do("POST", "/v1/clusters/"+name+"/nodepools", `{"name":"workers","spec":{"replicas":1,
		"release":{"version":"`+newRelease+`"},"management":{"upgradeType":"Replace"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create nodepool: %d %s", code, body)
	}
	c.waitPoolReady(name, "workers", 1, poolReady)
	kc := c.kubeClient(name)
	writeConfigMaps(t, kc, "before-sleep")
	nodes := readyNodes(t, kc, "workers")
	if len(nodes) != 1 {
		t.Fatalf("ready nodes before hibernation: %d, want 1", len(nodes))
	}
	node := nodes[0].Name

	if code, body := c.do("PATCH", "/v1/clusters/"+name, `{"spec":{"hibernation":{"enabled":true}}}`, nil); code != http.StatusOK {
		t.Fatalf("hibernate: %d %s", code, body)
	}
	waitHibernated(t, s, c, name, api.HibernationReasonRequested)

	// Every daemon and the local cloud restart (hostplane dev stopped and started again on
	// the same data): the cluster stays asleep.
	stop()
	s, c = startStackAt(t, dir)
	t.Cleanup(func() { s.Stop(context.Background()) })
	waitHibernated(t, s, c, name, api.HibernationReasonRequested)

	// A plain GET with the kubeconfig from before wakes it: infrad's load balancer holds the
	// connection until kube-apiserver answers, and the answer is the object written before.
	got, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), "before-sleep", metav1.GetOptions{})
	if err != nil || got.Data["written"] != "before-sleep" {
		t.Fatalf("GET on the hibernated cluster: %v, %v; want the ConfigMap written before", got, err)
	}
	cl = c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	if h := cl.Status.Hibernation; h == nil || h.Reason != api.HibernationReasonConnection || cl.Spec.Hibernating() {
		t.Errorf("woken by a connection, but spec.hibernation %s, status.hibernation %s", lazyJSON{cl.Spec.Hibernation}, lazyJSON{h})
	}
	expectConfigMaps(t, c, name, []string{"before-sleep"}, nil)
	var back []string
	testenv.Eventually(t, hibernateWait, func() bool {
		back = back[:0]
		for _, n := range readyNodes(t, c.kubeClient(name), "workers") {
			back = append(back, n.Name)
		}
		return len(back) == 1 && back[0] == node
	}, "node %s never came back Ready; ready nodes: %v", node, lazyJSON{&back})
	if h, _ := c.cluster(name); h.Status.Conditions.IsTrue(api.ConditionHibernated) {
		t.Errorf("awake, but Hibernated is True")
	}
	// Awake, a new machine joins: its kubelet's CSR is approved again.
	if code, body := c.do("PATCH", "/v1/clusters/"+name+"/nodepools/workers", `{"spec":{"replicas":2}}`, nil); code != http.StatusOK {
		t.Fatalf("scale the woken cluster's pool: %d %s", code, body)
	}
	c.waitPoolReady(name, "workers", 2, poolReady)

	// Asleep again, then delete: nothing of it may be left.
	if code, body := c.do("PATCH", "/v1/clusters/"+name, `{"spec":{"hibernation":{"enabled":true}}}`, nil); code != http.StatusOK {
		t.Fatalf("hibernate again: %d %s", code, body)
	}
	waitHibernated(t, s, c, name, api.HibernationReasonRequested)
	if code, body := c.do("DELETE", "/v1/clusters/"+name, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete: %d %s", code, body)
	}
	testenv.Eventually(t, 4*time.Minute, func() bool {
		_, code := c.cluster(name)
		return code == http.StatusNotFound
	}, "the hibernated cluster never finished deleting")
	if left := cloudMachines(t, s, name); len(left) > 0 {
		t.Errorf("the local cloud still holds machines of the deleted cluster: %v", left)
	}
	assertNothingLeft(t, s, c, name, endpoint)
}

// A schedule hibernates the cluster at its start and wakes it at its end, in the schedule's
// time zone. The daemons run on a fake clock the test moves past each firing, so nothing
// waits for the wall clock to reach a cron minute.
func TestHibernation_ScheduleHibernatesAtItsStartAndWakesAtItsEnd(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	fake := clocktesting.NewFakeClock(time.Now())
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.Clock = fake })
	t.Cleanup(func() { s.Stop(context.Background()) })

	cronAt := func(at time.Time) string {
		at = at.In(berlin)
		return fmt.Sprintf("%d %d %d %d *", at.Minute(), at.Hour(), at.Day(), int(at.Month()))
	}
	start := fake.Now().Truncate(time.Minute).Add(5 * time.Minute)
	end := start.Add(10 * time.Minute)
	const name = "nightly"
	body := fmt.Sprintf(`{"name":%q,"spec":{"release":{"version":%q},"hibernation":{"schedules":[{"start":%q,"end":%q,"location":"Europe/Berlin"}]}}}`,
		name, newRelease, cronAt(start), cronAt(end))
	if code, b := c.do("POST", "/v1/clusters", body, nil); code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, b)
	}
	c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	var cl api.Cluster
	testenv.Eventually(t, time.Minute, func() bool {
		cl, _ = c.cluster(name)
		return cl.Status.Hibernation != nil && cl.Status.Hibernation.ScheduleTime != nil
	}, "clusterd never looked at the schedule: %s", lazyJSON{&cl})
	if cl.Spec.Hibernating() {
		t.Fatalf("hibernating before the schedule's start: %s", lazyJSON{cl.Spec.Hibernation})
	}

	fake.SetTime(start.Add(time.Second))
	waitHibernated(t, s, c, name, api.HibernationReasonSchedule)

	fake.SetTime(end.Add(time.Second))
	cl = c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	if h, _ := cl.Status.Conditions.Get(api.ConditionHibernated); h.Status != api.ConditionFalse {
		t.Errorf("awake after the schedule's end, but Hibernated is %s (%s)", h.Status, h.Message)
	}
	if cl.Status.Hibernation == nil || cl.Status.Hibernation.Reason != api.HibernationReasonSchedule {
		t.Errorf("status.hibernation %s, want reason %s", lazyJSON{cl.Status.Hibernation}, api.HibernationReasonSchedule)
	}
	deleteCluster(t, s, c, name, available)
}

// A cluster whose endpoint sees no new connection for idleAfter hibernates on its own, and
// the next connection wakes it. The daemons run on a fake clock the test moves past idleAfter.
func TestHibernation_IdleAfterHibernatesAnUnusedClusterAndAConnectionWakesIt(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	fake := clocktesting.NewFakeClock(time.Now())
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.Clock = fake })
	t.Cleanup(func() { s.Stop(context.Background()) })
	const name = "idler"
	body := fmt.Sprintf(`{"name":%q,"spec":{"release":{"version":%q},"hibernation":{"idleAfter":"10m"}}}`, name, newRelease)
	if code, b := c.do("POST", "/v1/clusters", body, nil); code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, b)
	}
	c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	kc := c.kubeClient(name)
	writeConfigMaps(t, kc, "used-once")

	// Idle counts from the cluster's creation or its endpoint's last connection, whichever is
	// later; the creation time is the store's wall clock, which runs on while the stack starts
	// (a minute or more on a loaded machine), so the fake clock steps from whichever is later.
	created, _ := c.cluster(name)
	since := fake.Now()
	if created.CreationTimestamp.After(since) {
		since = created.CreationTimestamp
	}
	fake.SetTime(since.Add(9 * time.Minute))
	if cl, _ := c.cluster(name); cl.Spec.Hibernating() {
		t.Fatalf("hibernated after 9 of 10 idle minutes: %s", lazyJSON{cl.Status.Hibernation})
	}
	fake.SetTime(since.Add(11 * time.Minute))
	waitHibernated(t, s, c, name, api.HibernationReasonIdle)

	got, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), "used-once", metav1.GetOptions{})
	if err != nil || got.Data["written"] != "used-once" {
		t.Fatalf("GET on the idle-hibernated cluster: %v, %v", got, err)
	}
	c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	deleteCluster(t, s, c, name, available)
}

// A HighlyAvailable cluster's endpoint wakes on connect and measures idleness like a
// SingleReplica one, because the daemons reach its apiservers through the balancer's internal
// listener (infra.internalEndpoint), which neither wakes it nor counts. One cluster, on a
// fake clock: idleAfter hibernates it; it stays asleep for a while with every daemon
// running; a request on the internal listener fails fast and wakes nothing; a plain
// client-go GET on the public endpoint wakes it and returns the object written before.
func TestHibernation_HighlyAvailable_IdleHibernatesDaemonsDoNotWakeAConnectionDoes(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	fake := clocktesting.NewFakeClock(time.Now())
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.Clock = fake })
	t.Cleanup(func() { s.Stop(context.Background()) })
	const name = "ha-idler"
	body := fmt.Sprintf(`{"name":%q,"spec":{"release":{"version":%q},"controllerAvailabilityPolicy":"HighlyAvailable",
		"hibernation":{"idleAfter":"10m"}}}`, name, newRelease)
	if code, b := c.do("POST", "/v1/clusters", body, nil); code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, b)
	}
	c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	var inf api.Infra
	if code, b := c.do("GET", "/v1/clusters/"+name+"/infra", "", &inf); code != http.StatusOK {
		t.Fatalf("infra: %d %s", code, b)
	}
	if inf.InternalEndpoint == nil || inf.InternalEndpoint.Port == 0 || *inf.InternalEndpoint == inf.Endpoint {
		t.Fatalf("an HA cluster's infra record has no internal endpoint of its own: %s", lazyJSON{&inf})
	}
	internal := net.JoinHostPort(inf.InternalEndpoint.Host, strconv.Itoa(inf.InternalEndpoint.Port))
	kc := c.kubeClient(name)
	writeConfigMaps(t, kc, "before-sleep")

	// Idle since the creation or the last connection (see the SingleReplica idle test).
	created, _ := c.cluster(name)
	since := fake.Now()
	if created.CreationTimestamp.After(since) {
		since = created.CreationTimestamp
	}
	fake.SetTime(since.Add(9 * time.Minute))
	if cl, _ := c.cluster(name); cl.Spec.Hibernating() {
		t.Fatalf("hibernated after 9 of 10 idle minutes: %s", lazyJSON{cl.Status.Hibernation})
	}
	fake.SetTime(since.Add(11 * time.Minute))
	waitHibernated(t, s, c, name, api.HibernationReasonIdle)

	// The daemons keep their guest clients, Cluster API its cluster cache: none of it may
	// wake the cluster. Nor may a request on the internal listener, which is refused at once
	// (an accepted and closed connection would have client-go retry the GET for 10 s).
	cfg := c.restConfig(name)
	cfg.Host = "https://" + internal
	cfg.Timeout = 30 * time.Second
	direct, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := direct.CoreV1().ConfigMaps("default").Get(ctx(t), "before-sleep", metav1.GetOptions{}); err == nil {
		t.Errorf("the internal listener answered while the cluster hibernates")
	} else if !utilnet.IsConnectionRefused(err) {
		t.Errorf("a request on the internal listener of the hibernated cluster: %v, want the connection refused", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a request on the internal listener of the hibernated cluster took %v to fail, want at once", took)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cl, _ := c.cluster(name)
		if !cl.Spec.Hibernating() || !cl.Status.Conditions.IsTrue(api.ConditionHibernated) {
			t.Fatalf("something woke the hibernated HA cluster with no user connection: %s", lazyJSON{cl.Status.Hibernation})
		}
		time.Sleep(time.Second) // watching that nothing changes: there is no condition to wait for
	}

	// A plain GET on the public endpoint, with the kubeconfig from before, wakes it.
	began = time.Now()
	got, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), "before-sleep", metav1.GetOptions{})
	if err != nil || got.Data["written"] != "before-sleep" {
		t.Fatalf("GET on the hibernated HA cluster after %v: %v, %v; want the ConfigMap written before", time.Since(began), got, err)
	}
	t.Logf("the first GET on the hibernated HA cluster answered in %v", time.Since(began))
	cl := c.waitCondition(name, api.ConditionAvailable, api.ConditionTrue, available)
	if h := cl.Status.Hibernation; h == nil || h.Reason != api.HibernationReasonConnection || cl.Spec.Hibernating() {
		t.Errorf("woken by a connection, but spec.hibernation %s, status.hibernation %s", lazyJSON{cl.Spec.Hibernation}, lazyJSON{h})
	}
	if _, err := direct.CoreV1().ConfigMaps("default").Get(ctx(t), "before-sleep", metav1.GetOptions{}); err != nil {
		t.Errorf("the internal listener of the awake cluster: %v", err)
	}
	deleteCluster(t, s, c, name, available)
	if conn, err := net.DialTimeout("tcp", internal, time.Second); err == nil {
		conn.Close()
		t.Errorf("the deleted cluster's internal listener %s still accepts", internal)
	}
}

// Bad hibernation settings are refused with a problem naming each field.
func TestHibernation_BadSettingsAreRefusedFieldByField(t *testing.T) {
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.NoManagementAPIServer = true })
	t.Cleanup(func() { s.Stop(context.Background()) })
	body := fmt.Sprintf(`{"name":"badsleep","spec":{"release":{"version":%q},"hibernation":{"idleAfter":"-5m",
		"schedules":[{"start":"19:00 on weekdays","location":"Mars/Olympus"}]}}}`, newRelease)
	code, b := c.do("POST", "/v1/clusters", body, nil)
	if code != http.StatusBadRequest {
		t.Fatalf("create with bad hibernation: %d %s, want 400", code, b)
	}
	var p struct {
		Errors []api.FieldError `json:"errors"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range p.Errors {
		got[f.Field] = true
	}
	for _, f := range []string{"spec.hibernation.idleAfter", "spec.hibernation.schedules[0].start", "spec.hibernation.schedules[0].location"} {
		if !got[f] {
			t.Errorf("no error for %s in %s", f, b)
		}
	}
	if code, b := c.do("PATCH", "/v1/clusters/nope", `{"spec":{"hibernation":{"enabled":true}}}`, nil); code != http.StatusNotFound {
		t.Errorf("hibernate an unknown cluster: %d %s, want 404", code, b)
	}
}
