package componentd

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
// once it is ready (or FirstReplicaWait after it started); etcd's members start together,
// and so does everything once a replica serves.
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
	reps := func(states ...string) []replica { // "" runs nothing, "s" starting, "r" ready
		out := make([]replica, len(states))
		for i, s := range states {
			out[i].Replica = rollout.Replica{Running: s != "", Ready: s == "r", Hash: "h1"}
		}
		return out
	}
	d := &Daemon{}
	log := slog.New(slog.DiscardHandler)
	apiserver, etcd := desired(api.ComponentKubeAPIServer, 2), desired(api.ComponentEtcd, 3)

	if got := d.oneFirst(log, "c", etcd, reps("", "", ""), []int{0, 1, 2}); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("etcd members start %v, want all together", got)
	}
	if got := d.oneFirst(log, "c", desired(api.ComponentKubeAPIServer, 1), reps(""), []int{0}); !slices.Equal(got, []int{0}) {
		t.Errorf("a single kube-apiserver starts %v", got)
	}
	if got := d.oneFirst(log, "c", apiserver, reps("", ""), []int{0, 1}); !slices.Equal(got, []int{0}) {
		t.Fatalf("nothing runs: start %v, want the first replica alone", got)
	}
	if got := d.oneFirst(log, "c", apiserver, reps("s", ""), []int{1}); len(got) != 0 {
		t.Errorf("the first replica is starting: start %v, want nothing yet", got)
	}
	if got := d.oneFirst(log, "c", apiserver, reps("r", ""), []int{1}); !slices.Equal(got, []int{1}) {
		t.Errorf("the first replica is ready: start %v, want the other", got)
	}

	// A first replica that never gets ready holds the others back FirstReplicaWait at most.
	d.oneFirst(log, "c", apiserver, reps("", ""), []int{0, 1})
	key := "c/" + api.ComponentKubeAPIServer + "/h1"
	d.firstStart[key] = time.Now().Add(-FirstReplicaWait - time.Second)
	if got := d.oneFirst(log, "c", apiserver, reps("s", ""), []int{1}); !slices.Equal(got, []int{1}) {
		t.Errorf("the first replica is not ready after FirstReplicaWait: start %v, want the other", got)
	}
	// A replica found starting by a componentd that did not start it waits from now.
	if got := d.oneFirst(log, "other", apiserver, reps("s", ""), []int{1}); len(got) != 0 {
		t.Errorf("found a replica starting: start %v, want nothing yet", got)
	}
}
