package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// A first run serves before every release is built: a cluster that asks for a release whose
// binaries are not there yet is accepted, waits with a condition that says why, and starts by
// itself once the binaries appear; the release list says which releases can run.
func TestCluster_AtAReleaseNotBuiltYet_WaitsAndStartsOnceItIsBuilt(t *testing.T) {
	rel, err := release.Lookup(oldRelease)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireBinaries(t, rel, release.Components()...)
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)

	// A cache that holds etcd and the newest release, as `make run` leaves it before the
	// background build of the others is done.
	cache := t.TempDir()
	realCache := release.CacheDir()
	link := func(r release.Release, comps ...string) {
		t.Helper()
		for _, comp := range comps {
			// BinaryPath follows HOSTPLANE_CACHE_DIR: the path in the test's cache, relative
			// to it, is the same as in the real one.
			at, err := r.BinaryPath(comp)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(release.CacheDir(), at)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(cache, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(realCache, rel), dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv("HOSTPLANE_CACHE_DIR", cache)
	link(release.Latest(), release.Components()...)
	_, c := ownStack(t)

	state := func(version string) api.ReleaseInfo {
		var l api.ReleaseList
		if code, body := c.do("GET", "/v1/releases", "", &l); code != http.StatusOK {
			t.Fatalf("GET /v1/releases: %d %s", code, body)
		}
		for _, r := range l.Items {
			if r.Version == version {
				return r
			}
		}
		t.Fatalf("release %s not listed: %s", version, lazyJSON{l})
		return api.ReleaseInfo{}
	}
	if got := state(release.Latest().Version); got.State != api.ReleaseAvailable || !got.Default {
		t.Fatalf("newest release = %s, want Available and default", lazyJSON{got})
	}
	if got := state(oldRelease); got.State != api.ReleaseNotBuilt || got.Message == "" {
		t.Fatalf("release %s = %s, want NotBuilt with a message", oldRelease, lazyJSON{got})
	}

	code, body := c.do("POST", "/v1/clusters", `{"name":"early","spec":{"release":{"version":"`+oldRelease+`"},"controllerAvailabilityPolicy":"SingleReplica"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	cl := c.waitCondition("early", api.ConditionEtcdAvailable, api.ConditionTrue, available)
	testenv.Eventually(t, available, func() bool {
		cl, _ = c.cluster("early")
		cond, ok := cl.Status.Conditions.Get(api.ConditionKubeAPIServerAvailable)
		return ok && cond.Status == api.ConditionFalse && cond.Reason == "ReleaseNotBuilt"
	}, "kube-apiserver of a cluster at an unbuilt release never said ReleaseNotBuilt: %s", lazyJSON{&cl})
	if cl.Status.Conditions.IsTrue(api.ConditionAvailable) {
		t.Fatalf("cluster Available without its release's binaries: %s", lazyJSON{cl.Status})
	}

	// The build finishes: the cluster starts without anyone touching it.
	link(rel, release.KubeAPIServer, release.KubeControllerManager, release.KubeScheduler)
	if got := state(oldRelease); got.State != api.ReleaseAvailable {
		t.Fatalf("release %s after the build = %s, want Available", oldRelease, lazyJSON{got})
	}
	cl = c.waitCondition("early", api.ConditionAvailable, api.ConditionTrue, available)
	if v := cl.Status.Version; v == nil || len(v.History) == 0 || v.History[0].Version != oldRelease || v.History[0].CompletionTime == nil {
		t.Fatalf("version after start = %s, want %s completed", lazyJSON{cl.Status.Version}, oldRelease)
	}
}
