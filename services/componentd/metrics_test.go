package componentd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestMetrics_ComponentReplicasShowRolloutProgress(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.observeReplicas("demo", "kube-apiserver", 3, 3, 1) // one of three replicas at the new config
	for state, want := range map[string]float64{"desired": 3, "ready": 3, "updated": 1} {
		l := map[string]string{"cluster": "demo", "component": "kube-apiserver", "state": state}
		if v, ok := testenv.Metric(t, reg, "hostplane_component_replicas", l); !ok || v != want {
			t.Errorf("hostplane_component_replicas{state=%s} = %v (present %v), want %v", state, v, ok, want)
		}
	}
	if v, ok := testenv.Metric(t, reg, "hostplane_component_restarts_total", map[string]string{"cluster": "demo", "component": "kube-apiserver"}); !ok || v != 0 {
		t.Errorf("restarts before any restart = %v (present %v), want 0", v, ok)
	}
	m.forget("demo")
	if _, ok := testenv.Metric(t, reg, "hostplane_component_replicas", map[string]string{"cluster": "demo"}); ok {
		t.Error("a deleted cluster's replicas are still exported")
	}
}

func TestMetrics_RolloutDurationOfEveryComponentIsExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "karpenter"} {
		if n, ok := testenv.Metric(t, reg, "hostplane_component_rollout_duration_seconds", map[string]string{"component": c}); !ok || n != 0 {
			t.Errorf("rollout duration of %s before any rollout: %v observations (present %v), want 0", c, n, ok)
		}
	}
}
