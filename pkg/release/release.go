package release

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/hostplane/hostplane/pkg/api"
)

// Components run by a control plane, in start order.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// The node binaries of a release: not control-plane components (Components), but binaries of
// the release's cache (tools/k8s-bins/kubelet.sh builds both) that ignitiond serves to real
// nodes: the node agent and the Service proxy.
const (
	Kubelet   = "kubelet"
	KubeProxy = "kube-proxy"
)

// NodeBinaries lists the binaries a real node of a release runs.
func NodeBinaries() []string { return []string{Kubelet, KubeProxy} }

// Components lists every component of a release, in start order.
func Components() []string {
	return []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}
}

// Release is one Kubernetes release hostplane can run.
type Release struct {
	// Version is the Kubernetes version without a leading "v", for example "1.34.4".
	Version string
	// EtcdVersion is the etcd the process runtime runs with this release, without a leading
	// "v" (its binary is <cache>/etcd/v<EtcdVersion>/etcd).
	EtcdVersion string
	// Images maps each component to the image the kubernetes runtime deploys. The etcd image
	// is the one kubeadm pins for the release, so it may differ from EtcdVersion.
	Images map[string]string
}

// etcdVersion is the etcd built by tools/etcd for every release (see tools/etcd/go.mod).
const etcdVersion = "3.6.16"

const registry = "registry.k8s.io"

// catalogue holds every release, keyed by version. The etcd images are kubeadm's
// SupportedEtcdVersion for each minor at that patch release.
var catalogue = map[string]Release{
	"1.33.13": newRelease("1.33.13", "3.5.24-0"),
	"1.34.4":  newRelease("1.34.4", "3.6.5-0"),
}

func newRelease(version, etcdImageTag string) Release {
	return Release{
		Version:     version,
		EtcdVersion: etcdVersion,
		Images: map[string]string{
			Etcd:                  registry + "/etcd:" + etcdImageTag,
			KubeAPIServer:         registry + "/kube-apiserver:v" + version,
			KubeControllerManager: registry + "/kube-controller-manager:v" + version,
			KubeScheduler:         registry + "/kube-scheduler:v" + version,
		},
	}
}

// Lookup returns the release of version ("1.34.4"; a leading "v" is accepted). An unknown
// version is an api.CodeInvalid error that lists the known ones.
func Lookup(version string) (Release, error) {
	r, ok := catalogue[strings.TrimPrefix(strings.TrimSpace(version), "v")]
	if !ok {
		return Release{}, api.Errorf(api.CodeInvalid, "unknown release %q; known releases: %s",
			version, strings.Join(Versions(), ", "))
	}
	return r.clone(), nil
}

// Versions returns every known version, oldest first.
func Versions() []string {
	vs := make([]string, 0, len(catalogue))
	for v := range catalogue {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b string) int {
		return compare(mustParse(a), mustParse(b))
	})
	return vs
}

// Latest returns the newest known release: the default for new clusters and for the
// management plane.
func Latest() Release {
	vs := Versions()
	return catalogue[vs[len(vs)-1]].clone()
}

// Minor returns the release's "major.minor", for example "1.34".
func (r Release) Minor() string {
	v, err := api.ParseVersion(r.Version)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d", v.Major(), v.Minor())
}

// CacheDir is where built release binaries live: $HOSTPLANE_CACHE_DIR, or
// $HOME/.cache/hostplane.
func CacheDir() string {
	if d := os.Getenv("HOSTPLANE_CACHE_DIR"); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "hostplane-cache")
	}
	return filepath.Join(home, ".cache", "hostplane")
}

// BinaryPath returns where component's binary belongs in the cache, whether or not it is
// built. component is one of Components().
func (r Release) BinaryPath(component string) (string, error) {
	switch component {
	case Etcd:
		return filepath.Join(CacheDir(), "etcd", "v"+r.EtcdVersion, Etcd), nil
	case KubeAPIServer, KubeControllerManager, KubeScheduler, Kubelet, KubeProxy:
		return filepath.Join(CacheDir(), "releases", "v"+r.Version, component), nil
	default:
		return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownComponent, component,
			strings.Join(Components(), ", "))
	}
}

// Binary returns the absolute path of component's executable for this release. A binary
// that is not built yet is an ErrBinaryMissing error saying how to build it.
func (r Release) Binary(component string) (string, error) {
	path, err := r.BinaryPath(component)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return path, nil
	}
	build := fmt.Sprintf("`make k8s-bins` (or tools/k8s-bins/build.sh %s)", r.Version)
	if slices.Contains(NodeBinaries(), component) {
		build = fmt.Sprintf("`make kubelet` (or tools/k8s-bins/kubelet.sh %s)", r.Version)
	}
	return "", fmt.Errorf("%w: %s for release %s is not at %s; build it with %s, "+
		"which caches it under %s (set HOSTPLANE_CACHE_DIR to move the cache)",
		ErrBinaryMissing, component, r.Version, path, build, CacheDir())
}

// CheckUpgrade reports whether a cluster at release from may move to release to: to must be
// a known release, not older than from, and at most one minor newer (Kubernetes' version
// skew policy for the control plane). Staying on the same version is allowed.
func CheckUpgrade(from, to string) error {
	fv, err := api.ParseVersion(from)
	if err != nil {
		return api.Errorf(api.CodeInvalid, "current release %q is not a version: %v", from, err)
	}
	if _, err := Lookup(to); err != nil {
		return err
	}
	tv := mustParse(to)
	switch {
	case tv.LessThan(fv):
		return api.Errorf(api.CodeInvalid, "cannot downgrade from %s to %s: downgrades are not supported",
			fv, tv)
	case tv.Major() != fv.Major():
		return api.Errorf(api.CodeInvalid, "cannot upgrade from %s to %s: upgrades across major versions are not supported",
			fv, tv)
	case tv.Minor() > fv.Minor()+1:
		return api.Errorf(api.CodeInvalid, "cannot upgrade from %s to %s: that skips a minor release; upgrade to %d.%d first",
			fv, tv, fv.Major(), fv.Minor()+1)
	}
	return nil
}

func (r Release) clone() Release {
	r.Images = maps.Clone(r.Images)
	return r
}

func mustParse(s string) *version.Version {
	v, err := api.ParseVersion(s)
	if err != nil {
		panic("release: bad version in catalogue: " + err.Error())
	}
	return v
}

func compare(a, b *version.Version) int {
	switch {
	case a.LessThan(b):
		return -1
	case b.LessThan(a):
		return 1
	}
	return 0
}
