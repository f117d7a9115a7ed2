package nodepoold

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// With no periodic reconcile at all (both requeues an hour), a pool's status follows its
// guest's Nodes through the Node watch: a Node turning NotReady shows, a guest kube-apiserver
// that stops makes the pool report from Cluster API and say the guest is unreadable (never
// what the watch saw last), one that is back is read again, and the watch stops when the
// cluster hibernates.
func TestNodePool_StatusFollowsTheGuestNodesByWatch_AndSaysWhenTheGuestIsUnreadable(t *testing.T) {
	reg := prometheus.NewRegistry()
	ge := startGuest(t, func(c *Config) {
		c.Requeue, c.ProgressRequeue, c.Registry = time.Hour, time.Hour, reg
	})
	ctx := context.Background()
	np := ge.createPool("demo", poolBody("metal", `"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"InPlace"}`))
	hash := np.Status.ConfigHash
	ge.putIgnition("demo", "metal", hash, "token-one")
	testenv.Eventually(t, time.Minute, func() bool { return ge.get("metal", &clusterv1.MachineSet{}) == nil }, "no MachineSet")
	ge.addMachine("metal", "metal-a", api.UserDataSecretName("metal", hash), hash)
	// Cluster API's view of the node, as its Machine controller would write it.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &clusterv1.Machine{}
		if err := ge.kube.Get(ctx, client.ObjectKey{Namespace: ge.ns, Name: "metal-a"}, m); err != nil {
			return err
		}
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineNodeReadyCondition, Status: metav1.ConditionTrue,
			Reason: "NodeReady", LastTransitionTime: metav1.Now()}}
		return ge.kube.Status().Update(ctx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	healthy := func() api.Condition {
		c, _ := ge.getPool("demo", "metal").Status.Conditions.Get(api.NodePoolConditionAllNodesHealthy)
		return c
	}
	testenv.Eventually(t, time.Minute, func() bool {
		got := ge.getPool("demo", "metal")
		return got.Status.ReadyReplicas == 1 && got.Status.Conditions.IsTrue(api.NodePoolConditionReady)
	}, "the pool never became ready: %+v", ge.getPool("demo", "metal").Status)
	if v, ok := testenv.Metric(t, reg, "hostplane_nodepoold_guest_node_informers", nil); !ok || v != 1 {
		t.Errorf("guest node informers = %v (present %v), want 1", v, ok)
	}

	// The guest says the node is not Ready: the pool says so, though Cluster API does not.
	setReady := func(status corev1.ConditionStatus, reason string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := ge.node("metal-a")
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			_, err := ge.guest.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionFalse, "KubeletNotReady")
	testenv.Eventually(t, 30*time.Second, func() bool {
		c := healthy()
		return c.Status == api.ConditionFalse && strings.Contains(c.Message, "node metal-a is not Ready")
	}, "a NotReady node never showed in the pool: %+v", healthy())

	// The guest's kube-apiserver stops: the pool reports Cluster API's view and says why.
	if err := ge.guestKube.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		c := healthy()
		return c.Status == api.ConditionTrue && strings.Contains(c.Message, "the guest cluster is unreadable")
	}, "the pool never said the guest is unreadable: %+v", healthy())

	// Back: the guest is read again (its node is still NotReady).
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ge.guestKube.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		c := healthy()
		return c.Status == api.ConditionFalse && strings.Contains(c.Message, "node metal-a is not Ready")
	}, "the pool never read the guest again: %+v", healthy())
	setReady(corev1.ConditionTrue, "KubeletReady")
	testenv.Eventually(t, 30*time.Second, func() bool {
		c := healthy()
		return c.Status == api.ConditionTrue && !strings.Contains(c.Message, "unreadable")
	}, "the Ready node never showed in the pool: %+v", healthy())

	// Hibernating: nothing of the guest is watched.
	if _, _, err := ge.clusters.Mutate(ctx, "demo", false, func(c *api.Cluster) error {
		c.Spec.Hibernation = &api.Hibernation{Enabled: new(true)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(ge.nats.JS, "clusterd").Publish(ctx, "demo", events.ResourceCluster, events.VerbClusterUpdated, "demo", nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		v, ok := testenv.Metric(t, reg, "hostplane_nodepoold_guest_node_informers", nil)
		return ok && v == 0
	}, "the guest's Nodes are still watched while the cluster hibernates")
}
