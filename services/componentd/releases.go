package componentd

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/release"
)

// ReasonReleaseNotBuilt is a component's Available (or RolloutComplete) reason while the
// binaries of the release its cluster asks for are not built on this host.
const ReasonReleaseNotBuilt = "ReleaseNotBuilt"

// ReasonCannotRun is a component's Available reason while this host cannot run it as
// configured (component.ErrCannotRun): the message says what is missing.
const ReasonCannotRun = "CannotRun"

// releaseBuildPoll is how often a cluster waiting for its release's binaries looks again.
const releaseBuildPoll = 5 * time.Second

// listReleases answers GET /v1/releases: every known release and whether this runtime can
// run it now.
func (d *Daemon) listReleases(w http.ResponseWriter, _ *http.Request) error {
	latest := release.Latest().Version
	var list api.ReleaseList
	for _, v := range release.Versions() {
		rel, err := release.Lookup(v)
		if err != nil {
			return err
		}
		info := api.ReleaseInfo{Version: rel.Version, EtcdVersion: rel.EtcdVersion, Default: v == latest, State: api.ReleaseAvailable}
		if d.cfg.Runtime == RuntimeProcess {
			info.State, info.Message = binariesState(rel)
		}
		list.Items = append(list.Items, info)
	}
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

// binariesState says whether the process runtime can run rel now, and if not, what is
// missing and what happens next.
func binariesState(rel release.Release) (state, message string) {
	missing := rel.Missing() // one look at the cache: State would look again
	switch {
	case len(missing) == 0:
		return api.ReleaseAvailable, ""
	case rel.Building():
		return api.ReleaseBuilding, fmt.Sprintf("%s %s being built by tools/k8s-bins/build.sh; clusters at %s start when the build is done",
			strings.Join(missing, ", "), isAre(len(missing)), rel.Version)
	default:
		return api.ReleaseNotBuilt, fmt.Sprintf("%s %s not built in %s; run `tools/k8s-bins/build.sh %s` (or `make k8s-bins`): clusters at %s wait until then",
			strings.Join(missing, ", "), isAre(len(missing)), release.CacheDir(), rel.Version, rel.Version)
	}
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
