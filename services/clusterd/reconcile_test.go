package clusterd

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const adminKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: https://127.0.0.1:36443
users:
- name: admin
contexts:
- name: admin@demo
  context: {cluster: demo, user: admin}
current-context: admin@demo
`

func TestCluster_WhenInfraPKIAndComponentsAreReady_BecomesAvailableWithEndpoint(t *testing.T) {
	e := start(t)
	e.create("demo", "1.34.4")
	e.waitCondition("demo", api.ConditionInfrastructureReady, api.ConditionFalse, "waiting for infrad")
	e.waitCondition("demo", api.ConditionAvailable, api.ConditionFalse, "waiting for etcd")

	e.putInfra("demo", true)
	e.waitCondition("demo", api.ConditionInfrastructureReady, api.ConditionTrue, "127.0.0.1:36443")
	e.waitCondition("demo", api.ConditionPKIReady, api.ConditionFalse, "waiting for pkid")

	e.putPKI("demo", []byte(adminKubeconfig))
	e.waitCondition("demo", api.ConditionPKIReady, api.ConditionTrue, "")
	e.waitCondition("demo", api.ConditionAvailable, api.ConditionFalse, "waiting for componentd to start etcd")

	e.putComponent("demo", api.ComponentEtcd, "1.34.4", 1, 1)
	e.putComponent("demo", api.ComponentKubeAPIServer, "1.34.4", 0, 1)
	e.waitCondition("demo", api.ConditionEtcdAvailable, api.ConditionTrue, "1/1 replicas ready")
	e.waitCondition("demo", api.ConditionAvailable, api.ConditionFalse, "waiting for kube-apiserver: 0/1 replicas ready")

	e.putControlPlane("demo", "1.34.4")
	e.waitCondition("demo", api.ConditionAvailable, api.ConditionTrue, "127.0.0.1:36443")
	e.waitCondition("demo", api.ConditionProgressing, api.ConditionFalse, "runs 1.34.4")
	c := e.get("demo")
	if ep := c.Status.ControlPlaneEndpoint; ep == nil || ep.Host != "127.0.0.1" || ep.Port != 36443 {
		t.Fatalf("endpoint %+v", ep)
	}
	if !c.Status.KubeconfigAvailable || c.Status.ObservedGeneration != 1 {
		t.Fatalf("status %+v", c.Status)
	}
	if h := c.Status.Version.History; len(h) != 1 || h[0].State != UpdateCompleted || h[0].CompletionTime == nil {
		t.Fatalf("history %+v", h)
	}
	for _, typ := range []string{api.ConditionKubeAPIServerAvailable, api.ConditionValidConfiguration} {
		if !c.Status.Conditions.IsTrue(typ) {
			t.Fatalf("%s is not True: %+v", typ, c.Status.Conditions)
		}
	}
	if d, _ := c.Status.Conditions.Get(api.ConditionDegraded); d.Status != api.ConditionFalse {
		t.Fatalf("degraded %+v", d)
	}

	// Metrics: one cluster Available=True, one create-to-available observation.
	if v := e.metric("hostplane_clusters", map[string]string{"condition": "Available", "status": "True"}); v != 1 {
		t.Fatalf("hostplane_clusters{Available,True} = %v", v)
	}
	if v := e.metric("hostplane_clusters", map[string]string{"condition": "Available", "status": "False"}); v != 0 {
		t.Fatalf("hostplane_clusters{Available,False} = %v", v)
	}
	if v := e.metric("hostplane_cluster_create_to_available_seconds", nil); v != 1 {
		t.Fatalf("create-to-available observations = %v", v)
	}
}

func TestCluster_UpgradeRecordsPartialThenCompletedHistory(t *testing.T) {
	e := start(t)
	e.create("demo", "1.33.13")
	e.putInfra("demo", true)
	e.putPKI("demo", []byte(adminKubeconfig))
	e.putControlPlane("demo", "1.33.13")
	e.waitCondition("demo", api.ConditionProgressing, api.ConditionFalse, "runs 1.33.13")

	if status, _, body := e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"release":{"version":"1.34.4"}}`); status != http.StatusOK {
		t.Fatalf("patch: %d %s", status, body)
	}
	e.waitCondition("demo", api.ConditionProgressing, api.ConditionTrue, "kube-apiserver runs 1.33.13")
	c := e.get("demo")
	if h := c.Status.Version.History; len(h) != 2 || h[0].Version != "1.34.4" || h[0].State != UpdatePartial || c.Status.ObservedGeneration != 2 {
		t.Fatalf("status during upgrade %+v", c.Status.Version)
	}
	if !c.Status.Conditions.IsTrue(api.ConditionAvailable) {
		t.Fatal("the cluster went unavailable because its spec changed")
	}

	e.putControlPlane("demo", "1.34.4")
	e.waitCondition("demo", api.ConditionProgressing, api.ConditionFalse, "runs 1.34.4")
	if h := e.get("demo").Status.Version.History; h[0].State != UpdateCompleted || h[1].Version != "1.33.13" {
		t.Fatalf("history after upgrade %+v", h)
	}
}

func TestKubeconfig_ReturnsTheOpenedAdminKubeconfigOncePKIIsReady(t *testing.T) {
	e := start(t)
	if status, _, _ := e.do(http.MethodGet, "/v1/clusters/nope/kubeconfig", "", ""); status != http.StatusNotFound {
		t.Fatalf("absent cluster: %d", status)
	}
	e.create("demo", "1.34.4")
	status, _, body := e.do(http.MethodGet, "/v1/clusters/demo/kubeconfig", "", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(problem(t, body).Detail, "not ready yet") {
		t.Fatalf("before pki: %d %s", status, body)
	}

	e.putInfra("demo", true)
	e.putPKI("demo", []byte(adminKubeconfig))
	status, hdr, body := e.do(http.MethodGet, "/v1/clusters/demo/kubeconfig", "", "")
	if status != http.StatusOK || hdr.Get("Content-Type") != ContentTypeYAML || string(body) != adminKubeconfig {
		t.Fatalf("kubeconfig: %d %s %q", status, hdr.Get("Content-Type"), body)
	}

	if status, _, _ := e.do(http.MethodDelete, "/v1/clusters/demo", "", ""); status != http.StatusAccepted {
		t.Fatalf("delete: %d", status)
	}
	status, _, body = e.do(http.MethodGet, "/v1/clusters/demo/kubeconfig", "", "")
	if status != http.StatusConflict || !strings.Contains(problem(t, body).Detail, "being deleted") {
		t.Fatalf("while deleting: %d %s", status, body)
	}
}

func TestDelete_ShowsWhatItWaitsForThenAnswers404OnceEverythingIsGone(t *testing.T) {
	e := start(t)
	if status, _, _ := e.do(http.MethodDelete, "/v1/clusters/nope", "", ""); status != http.StatusNotFound {
		t.Fatalf("delete of an absent cluster: %d", status)
	}
	e.create("demo", "1.34.4")
	e.putInfra("demo", true)
	e.putPKI("demo", []byte(adminKubeconfig))
	e.putControlPlane("demo", "1.34.4")
	e.waitCondition("demo", api.ConditionAvailable, api.ConditionTrue, "")

	deleting := subscribe(t, e, "hostplane.evt.demo.cluster.deleting")
	deleted := subscribe(t, e, "hostplane.evt.demo.cluster.deleted")
	status, _, body := e.do(http.MethodDelete, "/v1/clusters/demo", "", "")
	if status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", status, body)
	}
	var c api.Cluster
	decode(t, body, &c)
	if c.DeletionTimestamp == nil || !c.Status.Conditions.IsTrue(api.ConditionDeleting) {
		t.Fatalf("deleted object %+v", c)
	}
	// Idempotent: a second DELETE answers 202 and keeps the first timestamp.
	status, _, body = e.do(http.MethodDelete, "/v1/clusters/demo", "", "")
	var again api.Cluster
	decode(t, body, &again)
	if status != http.StatusAccepted || !again.DeletionTimestamp.Equal(*c.DeletionTimestamp) {
		t.Fatalf("second delete: %d %s", status, body)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return deleting.count() == 1 }, "one cluster.deleting event")

	e.waitCondition("demo", api.ConditionDeleting, api.ConditionTrue, "waiting for componentd to stop 4 components")
	for _, n := range components {
		e.remove(events.ResourceComponent, "demo", "demo."+n, e.components)
	}
	e.waitCondition("demo", api.ConditionDeleting, api.ConditionTrue, "waiting for infrad to release the infrastructure; waiting for pkid")
	e.remove(events.ResourceInfra, "demo", "demo", e.infra)
	e.waitCondition("demo", api.ConditionDeleting, api.ConditionTrue, "waiting for pkid to remove the certificates")
	if e.get("demo") == nil {
		t.Fatal("the cluster went before pkid released it")
	}
	e.remove(events.ResourcePKI, "demo", "demo", e.pki)

	testenv.Eventually(t, 20*time.Second, func() bool { return e.get("demo") == nil }, "GET answers 404 once everything is gone")
	testenv.Eventually(t, 10*time.Second, func() bool { return deleted.count() == 1 }, "one cluster.deleted event")
	if status, _, _ := e.do(http.MethodGet, "/v1/clusters/demo/kubeconfig", "", ""); status != http.StatusNotFound {
		t.Fatalf("kubeconfig after deletion: %d", status)
	}
	// The name is free again.
	e.create("demo", "1.34.4")
}

func TestDelete_OfAClusterNobodyActedOnYet_RemovesItAtOnce(t *testing.T) {
	e := start(t)
	e.create("quick", "1.34.4")
	if status, _, _ := e.do(http.MethodDelete, "/v1/clusters/quick", "", ""); status != http.StatusAccepted {
		t.Fatalf("delete: %d", status)
	}
	testenv.Eventually(t, 20*time.Second, func() bool { return e.get("quick") == nil }, "quick is gone")
}

func TestClusterEvents_CreateAndStatusChangesArePublished(t *testing.T) {
	e := start(t)
	created := subscribe(t, e, "hostplane.evt.demo.cluster.created")
	statuses := subscribe(t, e, "hostplane.evt.demo.cluster.status")
	updated := subscribe(t, e, "hostplane.evt.demo.cluster.updated")
	e.create("demo", "1.33.13")
	testenv.Eventually(t, 10*time.Second, func() bool { return created.count() == 1 && statuses.count() >= 1 }, "created and status events")
	if status, _, _ := e.do(http.MethodPatch, "/v1/clusters/demo", "application/json", `{"release":{"version":"1.34.4"}}`); status != http.StatusOK {
		t.Fatal("patch failed")
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return updated.count() == 1 }, "one updated event")
	ev := updated.last()
	if ev.Subject != "demo" || ev.Type != "io.hostplane.cluster.updated" || ev.Source != "/hostplane/clusterd" {
		t.Fatalf("event %+v", ev)
	}
}

// counter collects the events published on a subject.
type counter struct {
	ch  chan events.Event
	got []events.Event
}

func subscribe(t *testing.T, e *env, subject string) *counter {
	t.Helper()
	c := &counter{ch: make(chan events.Event, 100)}
	sub, err := e.nats.Conn.Subscribe(subject, func(m *nats.Msg) {
		if ev, err := events.Decode(m.Data); err == nil {
			c.ch <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nats.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *counter) drain() {
	for {
		select {
		case ev := <-c.ch:
			c.got = append(c.got, ev)
		default:
			return
		}
	}
}

func (c *counter) count() int { c.drain(); return len(c.got) }

func (c *counter) last() events.Event { c.drain(); return c.got[len(c.got)-1] }

// metric returns the value of the series of name with labels from clusterd's registry (for
// a histogram: its sample count); -1 when there is none.
func (e *env) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	if v, ok := testenv.Metric(e.t, e.registry, name, labels); ok {
		return v
	}
	return -1
}
