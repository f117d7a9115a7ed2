package nodepoold

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestMetrics_PoolReplicasAndConditionsPerPool(t *testing.T) {
	m := newMetrics()
	reg := prometheus.NewRegistry()
	if err := m.register(reg); err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	np := &api.NodePool{ObjectMeta: api.ObjectMeta{Name: "workers"}, Cluster: "demo"}
	np.Spec.Replicas = &three
	np.Status = api.NodePoolStatus{Replicas: 4, ReadyReplicas: 3, UpdatedReplicas: 1,
		Conditions: api.Conditions{{Type: api.NodePoolConditionUpdatingConfig, Status: api.ConditionTrue}}}
	m.observe(np)

	pool := func(extra map[string]string) map[string]string {
		l := map[string]string{"cluster": "demo", "nodepool": "workers"}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	for state, want := range map[string]float64{"desired": 3, "current": 4, "ready": 3, "updated": 1} {
		if v, ok := testenv.Metric(t, reg, "hostplane_nodepool_replicas", pool(map[string]string{"state": state})); !ok || v != want {
			t.Errorf("hostplane_nodepool_replicas{state=%s} = %v (present %v), want %v", state, v, ok, want)
		}
	}
	for status, want := range map[string]float64{"True": 1, "False": 0, "Unknown": 0} {
		l := pool(map[string]string{"condition": api.NodePoolConditionUpdatingConfig, "status": status})
		if v, ok := testenv.Metric(t, reg, "hostplane_nodepool_condition", l); !ok || v != want {
			t.Errorf("hostplane_nodepool_condition{UpdatingConfig,%s} = %v (present %v), want %v", status, v, ok, want)
		}
	}

	// An autoscaled pool's desired size is its current size.
	np.Spec.Replicas, np.Spec.AutoScaling = nil, &api.NodePoolAutoScaling{Min: 1, Max: 5}
	m.observe(np)
	if v, _ := testenv.Metric(t, reg, "hostplane_nodepool_replicas", pool(map[string]string{"state": "desired"})); v != 4 {
		t.Errorf("desired of an autoscaled pool = %v, want its 4 machines", v)
	}

	m.forget(api.NodePoolKey("demo", "workers"))
	if _, ok := testenv.Metric(t, reg, "hostplane_nodepool_replicas", pool(nil)); ok {
		t.Error("a deleted pool's replicas are still exported")
	}
}
