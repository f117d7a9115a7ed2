package api

// Release states of ReleaseInfo.State.
const (
	// ReleaseAvailable: clusters at this release start now (its binaries are built, or the
	// runtime runs images).
	ReleaseAvailable = "Available"
	// ReleaseBuilding: the release's binaries are being built on this host; clusters that ask
	// for it wait, with a condition saying so, and start when the build is done.
	ReleaseBuilding = "Building"
	// ReleaseNotBuilt: the binaries are missing and nothing builds them; clusters that ask
	// for it wait until someone runs tools/k8s-bins/build.sh <version>.
	ReleaseNotBuilt = "NotBuilt"
)

// ReleaseInfo is one Kubernetes release the management plane knows, with whether it can run
// here now.
type ReleaseInfo struct {
	// Version is the Kubernetes version, for example "1.34.4".
	Version string `json:"version"`
	// EtcdVersion is the etcd the process runtime runs with it.
	EtcdVersion string `json:"etcdVersion"`
	// Default is true for the release new clusters get when they name none.
	Default bool `json:"default,omitempty"`
	// State is ReleaseAvailable, ReleaseBuilding or ReleaseNotBuilt.
	State string `json:"state"`
	// Message says what is missing and how it gets built, when State is not Available.
	Message string `json:"message,omitempty"`
}

// ReleaseList is the answer of GET /v1/releases: every known release, oldest first.
type ReleaseList struct {
	Items []ReleaseInfo `json:"items"`
}
