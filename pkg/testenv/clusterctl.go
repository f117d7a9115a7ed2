package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hostplane/hostplane/pkg/release"
)

// ClusterctlVersion is the Cluster API release whose clusterctl the tests run: the one
// nodepoold runs in-process (tools/clusterctl/go.mod pins the same version).
const ClusterctlVersion = "v1.12.10"

// Clusterctl returns the path of Cluster API's clusterctl at ClusterctlVersion:
// HOSTPLANE_CLUSTERCTL when set, else the one tools/clusterctl/build.sh (make clusterctl, a
// prerequisite of make test) builds into ${HOSTPLANE_CACHE_DIR:-~/.cache/hostplane}. It fails
// the test, under CI=true or not, with how to build it when it is missing: the test has no
// fallback.
func Clusterctl(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOSTPLANE_CLUSTERCTL"); p != "" {
		return p
	}
	p := filepath.Join(release.CacheDir(), "clusterctl", ClusterctlVersion, "clusterctl")
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("testenv: clusterctl %s is not built (%s): run tools/clusterctl/build.sh (make clusterctl; about 4 minutes cold on 2 cores)", ClusterctlVersion, p)
	}
	return p
}
