package clusterd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestMetrics_ClusterConditionIsOneForItsStatusOnly(t *testing.T) {
	m := newMetrics()
	reg := prometheus.NewRegistry()
	if err := m.register(reg); err != nil {
		t.Fatal(err)
	}
	m.set("demo", api.Conditions{{Type: api.ConditionAvailable, Status: api.ConditionFalse}})
	m.set("prod", api.Conditions{{Type: api.ConditionAvailable, Status: api.ConditionTrue}})
	for _, tc := range []struct {
		cluster, status string
		want            float64
	}{
		{"demo", "False", 1}, {"demo", "True", 0}, {"demo", "Unknown", 0},
		{"prod", "True", 1}, {"prod", "False", 0},
	} {
		v, ok := testenv.Metric(t, reg, "hostplane_cluster_condition",
			map[string]string{"cluster": tc.cluster, "condition": api.ConditionAvailable, "status": tc.status})
		if !ok || v != tc.want {
			t.Errorf("hostplane_cluster_condition{cluster=%s,status=%s} = %v (present %v), want %v", tc.cluster, tc.status, v, ok, tc.want)
		}
	}
	if v, _ := testenv.Metric(t, reg, "hostplane_clusters", map[string]string{"condition": api.ConditionAvailable, "status": "True"}); v != 1 {
		t.Errorf("hostplane_clusters{Available,True} = %v, want 1", v)
	}
	m.forget("demo")
	if _, ok := testenv.Metric(t, reg, "hostplane_cluster_condition", map[string]string{"cluster": "demo"}); ok {
		t.Error("a deleted cluster's conditions are still exported")
	}
}
