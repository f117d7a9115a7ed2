package procruntime

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
)

// A HighlyAvailable kube-apiserver's replicas that run nothing start one first, the others
// once it is ready (or once it has restarted, was not started by this componentd, or
// started FirstReplicaWait ago); etcd's members start together, and so does everything once
// a replica serves.
func TestOneFirst_StartsOneKubeAPIServerReplicaAloneUntilItIsReady(t *testing.T) {
	byName := map[string]*component.Component{}
	for _, c := range component.All() {
		byName[c.Name] = c
	}
	desired := func(name string, n int) component.Desired {
		w := component.Desired{Component: byName[name], Replicas: n, Hash: "h1"}
		for i := range n {
			w.Specs = append(w.Specs, process.Spec{Name: name + "-" + string(rune('0'+i))})
		}
		return w
	}
	now := time.Now()
	// "" runs nothing, "s" started just now by this componentd, "r" ready, "o" running but
	// started FirstReplicaWait ago, "c" restarted (crash loop), "a" left running by another
	// componentd (not supervised).
	reps := func(states ...string) []replica {
		out := make([]replica, len(states))
		for i, s := range states {
			r := replica{supervised: s != "a", status: process.Status{StartedAt: now}}
			r.Replica = rollout.Replica{Running: s != "", Ready: s == "r", Hash: "h1"}
			switch s {
			case "o":
				r.status.StartedAt = now.Add(-FirstReplicaWait - time.Second)
			case "c":
				r.status.Restarts = 1
			}
			out[i] = r
		}
		return out
	}
	log := slog.New(slog.DiscardHandler)
	apiserver, etcd := desired(api.ComponentKubeAPIServer, 2), desired(api.ComponentEtcd, 3)
	for _, tt := range []struct {
		name  string
		want  component.Desired
		reps  []replica
		start []int
		out   []int
	}{
		{"etcd members start together", etcd, reps("", "", ""), []int{0, 1, 2}, []int{0, 1, 2}},
		{"a single kube-apiserver starts", desired(api.ComponentKubeAPIServer, 1), reps(""), []int{0}, []int{0}},
		{"nothing runs: the first replica alone", apiserver, reps("", ""), []int{0, 1}, []int{0}},
		{"the first replica is starting: nothing yet", apiserver, reps("s", ""), []int{1}, nil},
		{"the first replica is ready: the other", apiserver, reps("r", ""), []int{1}, []int{1}},
		{"not ready after FirstReplicaWait: the other", apiserver, reps("o", ""), []int{1}, []int{1}},
		{"the first replica restarted: the other", apiserver, reps("c", ""), []int{1}, []int{1}},
		{"left running by another componentd: the other", apiserver, reps("a", ""), []int{1}, []int{1}},
	} {
		if got := oneFirst(log, tt.want, tt.reps, tt.start, now); !slices.Equal(got, tt.out) {
			t.Errorf("%s: start %v, want %v", tt.name, got, tt.out)
		}
	}
}
