package observe_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/observe"
)

func TestConditions_CountsObjectsAndExportsEachObjectsConditions(t *testing.T) {
	c := observe.NewConditions(
		prometheus.GaugeOpts{Name: "hostplane_pools", Help: "Pools by condition type and status."},
		prometheus.GaugeOpts{Name: "hostplane_pool_condition", Help: "1 for the status each condition has."},
		"cluster", "pool")
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	conds := api.Conditions{{Type: "Ready", Status: api.ConditionFalse}}
	c.Set("demo/a", conds, "demo", "a")
	conds[0].Status = api.ConditionTrue // Set keeps a copy
	c.Set("demo/b", conds, "demo", "b")
	c.Set("prod/c", conds, "prod", "c")
	c.Forget("prod/c")

	want := `
# HELP hostplane_pool_condition 1 for the status each condition has.
# TYPE hostplane_pool_condition gauge
hostplane_pool_condition{cluster="demo",condition="Ready",pool="a",status="False"} 1
hostplane_pool_condition{cluster="demo",condition="Ready",pool="a",status="True"} 0
hostplane_pool_condition{cluster="demo",condition="Ready",pool="a",status="Unknown"} 0
hostplane_pool_condition{cluster="demo",condition="Ready",pool="b",status="False"} 0
hostplane_pool_condition{cluster="demo",condition="Ready",pool="b",status="True"} 1
hostplane_pool_condition{cluster="demo",condition="Ready",pool="b",status="Unknown"} 0
# HELP hostplane_pools Pools by condition type and status.
# TYPE hostplane_pools gauge
hostplane_pools{condition="Ready",status="False"} 1
hostplane_pools{condition="Ready",status="True"} 1
hostplane_pools{condition="Ready",status="Unknown"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
