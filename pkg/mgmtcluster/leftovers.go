package mgmtcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Leftovers lists every trace of a cluster of cfg still on the host that is unambiguously
// the cluster's: its Dir, processes (by command line or cgroup), mounts under Dir, its
// network namespaces and host link, its cgroups, its CNI leases and log symlinks. After Stop
// it is empty. (What the host had before a run, such as sysctls and iptables chains, is for
// the caller to compare.)
func Leftovers(cfg Config) []string {
	cfg = cfg.withDefaults()
	var out []string
	if _, err := os.Stat(cfg.Dir); err == nil {
		out = append(out, "directory "+cfg.Dir)
	}
	for _, pid := range clusterPids(cfg.Dir, cfg.Name) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	for _, m := range mountPoints(mountinfo.PrefixFilter(cfg.Dir)) {
		out = append(out, "mount "+m)
	}
	for _, n := range dirNames(netnsDir) {
		if isOurNetns(cfg.Name, n) {
			out = append(out, "network namespace "+n)
		}
	}
	if _, err := net.InterfaceByName(hostLink(cfg.Name)); err == nil {
		out = append(out, "link "+hostLink(cfg.Name))
	}
	for _, h := range cgroupHierarchies() {
		for _, cg := range ourCgroups(h, cfg.Name) {
			out = append(out, "cgroup "+cg)
		}
	}
	if _, err := os.Stat(filepath.Join(cniStateDir, "networks", cniNetwork)); err == nil {
		out = append(out, "CNI leases "+filepath.Join(cniStateDir, "networks", cniNetwork))
	}
	for _, n := range dirNames(containerLogs) {
		if target, err := os.Readlink(filepath.Join(containerLogs, n)); err == nil && strings.HasPrefix(target, cfg.Dir+"/") {
			out = append(out, "log symlink "+filepath.Join(containerLogs, n))
		}
	}
	return out
}
