package mgmtcluster

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/release"
)

// Config describes a management cluster.
type Config struct {
	// Name prefixes everything the cluster creates on the host: network namespaces, links,
	// cgroups, node names. At most 5 lowercase letters or digits (link names are short);
	// default "hpm". Only one cluster of a Name may run at a time.
	Name string
	// Dir holds all state; default /var/lib/hostplane-mgmtcluster/<Name>. It must be on a
	// file system overlayfs accepts as an upper dir (not overlayfs or tmpfs on every kernel).
	// A fixed default lets Start find and undo what a crashed earlier run left.
	Dir string
	// Nodes is the number of kubelet nodes, 1 to 8; default 2.
	Nodes int
	// APIServerPort is the management kube-apiserver's port on the host's link address; 0
	// picks a free one. 443 lets pods reach it as https://kubernetes.default.svc, as in any
	// cluster: there is no kube-proxy, so the cluster DNS answers the Service's name with the
	// apiserver's own address and the pod dials the Service's port (443) there.
	APIServerPort int
	// Release whose binaries run (etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet); default release.Latest().
	Release release.Release
	// NodeMonitorGracePeriod is how long a node may be silent before the node lifecycle
	// controller marks it NotReady/Unknown; default 16s (kubelets renew their Lease every 2s).
	NodeMonitorGracePeriod time.Duration
	// EvictAfter is the default toleration of the not-ready and unreachable taints given to
	// pods that have none: how long pods stay bound to a lost node; default 5s.
	EvictAfter time.Duration
	// ReadyTimeout bounds each wait for a component to become ready; default 2 minutes.
	ReadyTimeout time.Duration
	// KeepData makes Stop (and the clean-up of a crashed run) leave the management
	// apiserver's data (its etcd and certificates) and the volumes' directories in Dir, so a
	// cluster started again with the same Dir has the objects, the PersistentVolumes and
	// their contents of the last run; everything else is undone as without it.
	KeepData bool
	// Log; default slog.Default().
	Log *slog.Logger
}

const (
	defaultName     = "hpm"
	defaultDirRoot  = "/var/lib/hostplane-mgmtcluster"
	defaultNodes    = 2
	maxNodes        = 8
	defaultGrace    = 16 * time.Second
	defaultEvict    = 5 * time.Second
	defaultReadyFor = 2 * time.Minute
)

// maxUnixSocketPath is the longest unix socket path Linux accepts (sun_path holds 108 bytes
// with the terminating NUL).
const maxUnixSocketPath = 107

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,4}$`)

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(defaultDirRoot, c.Name)
	}
	if abs, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = abs
	}
	if c.Nodes == 0 {
		c.Nodes = defaultNodes
	}
	if c.Release.Version == "" {
		c.Release = release.Latest()
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = defaultGrace
	}
	if c.EvictAfter == 0 {
		c.EvictAfter = defaultEvict
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = defaultReadyFor
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// kept are the entries of Dir that Stop and Cleanup leave (KeepData).
func (c Config) kept() []string {
	if c.KeepData {
		return []string{apiserverDir, volumesDir}
	}
	return nil
}

// Validate reports what is wrong in c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []string
	if !nameRE.MatchString(c.Name) {
		problems = append(problems, fmt.Sprintf("Name %q is not 1-5 lowercase letters or digits starting with a letter", c.Name))
	}
	if c.Dir == "/" || !filepath.IsAbs(c.Dir) {
		problems = append(problems, fmt.Sprintf("Dir %q is not a dedicated absolute directory", c.Dir))
	}
	if sock := filepath.Join(c.Dir, "n"+strconv.Itoa(maxNodes), "containerd", "containerd.sock.ttrpc"); len(sock) > maxUnixSocketPath {
		problems = append(problems, fmt.Sprintf("Dir %q is too long: a node's containerd socket under it (%d bytes) would pass the %d bytes a unix socket's path may have", c.Dir, len(sock), maxUnixSocketPath))
	}
	if c.Nodes < 1 || c.Nodes > maxNodes {
		problems = append(problems, fmt.Sprintf("Nodes %d is not between 1 and %d", c.Nodes, maxNodes))
	}
	if c.NodeMonitorGracePeriod < 4*time.Second {
		problems = append(problems, "NodeMonitorGracePeriod is under 4s")
	}
	if c.APIServerPort < 0 || c.APIServerPort > 65535 {
		problems = append(problems, fmt.Sprintf("APIServerPort %d is not a port", c.APIServerPort))
	}
	if c.EvictAfter < 0 || c.ReadyTimeout < 0 {
		problems = append(problems, "negative EvictAfter or ReadyTimeout")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}
	return nil
}
