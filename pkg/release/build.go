package release

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// BuildState says whether a release's binaries can run on this host.
type BuildState string

const (
	// Built: every component's binary is in the cache.
	Built BuildState = "Built"
	// Building: a binary is missing and tools/k8s-bins/build.sh is building the release now.
	Building BuildState = "Building"
	// NotBuilt: a binary is missing and nothing is building it.
	NotBuilt BuildState = "NotBuilt"
)

// buildingMarker is the file tools/k8s-bins/build.sh keeps in a release's cache directory
// while it builds that release; it holds the builder's process id.
const buildingMarker = ".building"

// Missing returns the components whose binaries are not in the cache, in start order.
func (r Release) Missing() []string {
	var missing []string
	for _, c := range Components() {
		if _, err := r.Binary(c); errors.Is(err, ErrBinaryMissing) {
			missing = append(missing, c)
		}
	}
	return missing
}

// State reports whether the release's binaries are built, being built, or neither.
func (r Release) State() BuildState {
	if len(r.Missing()) == 0 {
		return Built
	}
	if r.Building() {
		return Building
	}
	return NotBuilt
}

// Building reports whether a live builder holds the release's marker. A marker left by a
// builder that died (its process is gone) does not count.
func (r Release) Building() bool {
	b, err := os.ReadFile(filepath.Join(CacheDir(), "releases", "v"+r.Version, buildingMarker))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	// Signal 0 checks that the process exists; EPERM means it exists under another user.
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
