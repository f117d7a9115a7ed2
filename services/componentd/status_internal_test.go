package componentd

import (
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/store"
)

func TestEventVerb(t *testing.T) {
	comp := func(hash string, avail, complete, degraded bool) *api.ControlPlaneComponent {
		c := &api.ControlPlaneComponent{Spec: api.ControlPlaneComponentSpec{ConfigHash: hash}}
		for typ, ok := range map[string]bool{api.ConditionAvailable: avail, api.ConditionRolloutComplete: complete, api.ConditionDegraded: degraded} {
			s := api.ConditionFalse
			if ok {
				s = api.ConditionTrue
			}
			c.Status.Conditions.Set(api.Condition{Type: typ, Status: s}, time.Now())
		}
		return c
	}
	entry := func(c *api.ControlPlaneComponent) *store.Entry[api.ControlPlaneComponent] {
		return &store.Entry[api.ControlPlaneComponent]{Value: c}
	}
	tests := []struct {
		name string
		old  *store.Entry[api.ControlPlaneComponent]
		next *api.ControlPlaneComponent
		want string
	}{
		{"new component starting", nil, comp("a", false, false, false), VerbProgressing},
		{"became available", entry(comp("a", false, false, false)), comp("a", true, true, false), VerbAvailable},
		{"no condition changed", entry(comp("a", true, true, false)), comp("a", true, true, false), ""},
		{"a replica crashed", entry(comp("a", true, true, false)), comp("a", false, false, false), VerbDegraded},
		{"crash looping", entry(comp("a", true, true, false)), comp("a", true, true, true), VerbDegraded},
		{"single replica replaced in a rollout", entry(comp("a", true, true, false)), comp("b", false, false, false), VerbProgressing},
		{"rollout started", entry(comp("a", true, true, false)), comp("b", true, false, false), VerbProgressing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventVerb(tt.old, tt.next); got != tt.want {
				t.Errorf("eventVerb = %q, want %q", got, tt.want)
			}
		})
	}
}
