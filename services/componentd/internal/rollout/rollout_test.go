package rollout

import (
	"slices"
	"testing"
)

func TestNext(t *testing.T) {
	const h = "new"
	ready := func(hash string) Replica { return Replica{Running: true, Hash: hash, Ready: true} }
	starting := func(hash string) Replica { return Replica{Running: true, Hash: hash} }
	missing := Replica{}
	open := Gate{Available: true, Settled: true}
	tests := []struct {
		name     string
		replicas []Replica
		gate     Gate
		start    []int
		replace  int
	}{
		{"new component starts every replica at once", []Replica{missing, missing, missing}, open, []int{0, 1, 2}, -1},
		{"nothing starts before the dependencies are available", []Replica{missing}, Gate{}, nil, -1},
		{"missing replicas start when dependencies are available but still rolling", []Replica{missing, missing}, Gate{Available: true}, []int{0, 1}, -1},
		{"converged component has nothing to do", []Replica{ready(h), ready(h)}, open, nil, -1},
		{"rollout replaces the first old replica", []Replica{ready("old"), ready("old")}, open, nil, 0},
		{"rollout waits while the replaced replica is not ready", []Replica{starting(h), ready("old")}, open, nil, -1},
		{"rollout continues with the next replica once the first is ready", []Replica{ready(h), ready("old")}, open, nil, 1},
		{"rollout waits for dependencies to settle", []Replica{ready("old")}, Gate{Available: true}, nil, -1},
		{"an old replica that is down is replaced first", []Replica{ready("old"), starting("old")}, open, nil, 1},
		{"a missing replica is started before anything is replaced", []Replica{ready("old"), missing}, open, []int{1}, -1},
		{"a crashed replica at the desired hash holds the rollout", []Replica{ready("old"), starting(h), ready("old")}, open, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Next(h, tt.replicas, tt.gate)
			if !slices.Equal(s.Start, tt.start) || s.Replace != tt.replace {
				t.Errorf("Next = %+v, want start %v replace %d", s, tt.start, tt.replace)
			}
		})
	}
}

func TestNext_RollsAThreeReplicaComponentOneAtATime(t *testing.T) {
	rs := []Replica{{true, "old", true}, {true, "old", true}, {true, "old", true}}
	open := Gate{Available: true, Settled: true}
	var order []int
	for range 10 {
		s := Next("new", rs, open)
		if len(s.Start) > 0 {
			t.Fatalf("unexpected start %v", s.Start)
		}
		if s.Replace < 0 {
			break
		}
		order = append(order, s.Replace)
		rs[s.Replace] = Replica{Running: true, Hash: "new"} // replaced, not ready yet
		if got := Next("new", rs, open); got.Replace != -1 {
			t.Fatalf("replaced %d while %d was not ready", got.Replace, s.Replace)
		}
		if sum := Summarise("new", rs, 2); !sum.Available {
			t.Fatalf("lost quorum during rollout: %+v", sum)
		}
		rs[s.Replace].Ready = true
	}
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("replaced %v, want [0 1 2]", order)
	}
	if sum := Summarise("new", rs, 2); !sum.Complete || sum.Updated != 3 {
		t.Errorf("summary = %+v, want complete", sum)
	}
}

func TestSummarise(t *testing.T) {
	rs := []Replica{{true, "new", true}, {true, "old", true}, {true, "new", false}}
	s := Summarise("new", rs, 2)
	if s.Ready != 2 || s.Updated != 1 || !s.Available || s.Complete {
		t.Errorf("Summarise = %+v", s)
	}
	if s := Summarise("new", nil, 1); s.Available || s.Complete {
		t.Errorf("no replicas: %+v, want neither available nor complete", s)
	}
}
