package mgmtcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/pkg/cgroups"
)

// Host-wide places the kubelet, containerd and the CNI plugins write to whatever their
// configuration says.
const (
	netnsDir      = "/run/netns"          // ip netns, and containerd 1.6's pod namespaces (cni-<uuid>)
	shimSocketDir = "/run/containerd/s"   // containerd 1.6's shim sockets
	containerdRun = "/run/containerd"     // their parent
	cniStateDir   = "/var/lib/cni"        // libcni's result cache
	containerLogs = "/var/log/containers" // the kubelet's symlinks to pod logs
	podLogs       = "/var/log/pods"       // the kubelet's default pod log dir (ours is moved)
	cgroupRoot    = "/sys/fs/cgroup"      // cgroup v1 hierarchies (and the hybrid unified one)
	cniNetwork    = "hostplane-mgmt"      // our CNI network name (libcni cache files start with it)
	stateFile     = "host-state.json"     // in Dir
	procRoot      = "/proc"
	podNetnsPrefx = "cni-"
)

// kernelSysctls are the sysctls the kubelet sets when protectKernelDefaults is false.
var kernelSysctls = []string{
	"kernel.panic", "kernel.panic_on_oops", "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"vm.overcommit_memory", "vm.panic_on_oom",
}

// iptablesTools and iptablesTables are where the host's chains are recorded: the kubelet
// creates KUBE-FIREWALL, KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT in its own network
// namespace here, but any KUBE-* chain a run adds to the host is deleted too.
var iptablesTools = []string{"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"}
var iptablesTables = []string{"filter", "nat", "mangle"}

// hostState is what the host looked like before Start changed anything. It is written before
// the first change, so a later Start (after a crash) can undo the changes too.
type hostState struct {
	Name    string            `json:"name"`
	Sysctls map[string]string `json:"sysctls"`
	// Chains per "tool/table": the chains that existed.
	Chains map[string][]string `json:"chains"`
	// Existed: host paths that existed before (the rest were created by the run).
	Existed map[string]bool `json:"existed"`
	// NetnsMounted: /run/netns was a mount point already.
	NetnsMounted bool `json:"netnsMounted"`
	// Netns and ShimSockets: entries of /run/netns and /run/containerd/s before.
	Netns       []string `json:"netns"`
	ShimSockets []string `json:"shimSockets"`
	// Keep: entries of the cluster's Dir that teardown leaves (Config.KeepData).
	Keep []string `json:"keep,omitempty"`
}

// watchedPaths are host paths whose existence is recorded.
func watchedPaths() []string {
	p := []string{netnsDir, shimSocketDir, containerdRun, cniStateDir, containerLogs, podLogs}
	for _, h := range cgroupHierarchies() {
		p = append(p, filepath.Join(h, "kubepods"), filepath.Join(h, "k8s.io"))
	}
	return p
}

func recordHost(name string) (hostState, error) {
	st := hostState{Name: name, Sysctls: map[string]string{}, Chains: map[string][]string{}, Existed: map[string]bool{}}
	for _, k := range kernelSysctls {
		if v, err := readSysctl(k); err == nil {
			st.Sysctls[k] = v
		}
	}
	for _, tool := range iptablesTools {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		for _, table := range iptablesTables {
			chains, err := listChains(tool, table)
			if err != nil {
				continue
			}
			st.Chains[tool+"/"+table] = chains
		}
	}
	for _, p := range watchedPaths() {
		_, err := os.Lstat(p)
		st.Existed[p] = err == nil
	}
	st.NetnsMounted = isMountPoint(netnsDir)
	st.Netns = dirNames(netnsDir)
	st.ShimSockets = dirNames(shimSocketDir)
	return st, nil
}

func saveState(dir string, st hostState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, stateFile), b, 0o600)
}

func loadState(dir string) (hostState, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return hostState{}, false, nil
	}
	if err != nil {
		return hostState{}, false, err
	}
	var st hostState
	if err := json.Unmarshal(b, &st); err != nil {
		return hostState{}, false, fmt.Errorf("%s: %w", stateFile, err)
	}
	return st, true, nil
}

// teardown undoes everything a cluster named st.Name with state in dir changed, whether it
// is running, stopped or crashed: it kills every process left (containers, shims,
// containerds, kubelets), unmounts, deletes namespaces and cgroups, restores sysctls and
// iptables chains, removes what it created in host directories, and finally dir. It carries
// on past failures and returns them all.
func teardown(ctx context.Context, log *slog.Logger, dir string, st hostState) error {
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if pids := clusterPids(dir, st.Name); len(pids) > 0 {
		log.Info("killing the cluster's remaining processes", "pids", pids)
	}
	note(killLeftovers(ctx, dir, st.Name))
	note(unmountUnder(dir))
	// Pods' namespaces (containerd 1.6 keeps them in /run/netns) and ours.
	for _, n := range dirNames(netnsDir) {
		if slices.Contains(st.Netns, n) {
			continue
		}
		if strings.HasPrefix(n, podNetnsPrefx) || isOurNetns(st.Name, n) {
			log.Debug("deleting network namespace", "netns", n)
			note(deleteNetns(n))
		}
	}
	note(deleteLink(hostLink(st.Name)))
	if !st.NetnsMounted && isMountPoint(netnsDir) && len(dirNames(netnsDir)) == 0 {
		note(unix.Unmount(netnsDir, unix.MNT_DETACH))
	}
	if !st.Existed[netnsDir] {
		_ = os.Remove(netnsDir) // only when empty
	}
	note(removeCgroups(st))
	for k, v := range st.Sysctls {
		if now, err := readSysctl(k); err == nil && now != v {
			log.Info("restoring a sysctl the kubelet changed", "sysctl", k, "from", now, "to", v)
			note(writeSysctl(k, v))
		}
	}
	note(restoreChains(log, st))
	// Shim sockets of shims that were killed.
	for _, n := range dirNames(shimSocketDir) {
		if !slices.Contains(st.ShimSockets, n) {
			note(os.Remove(filepath.Join(shimSocketDir, n)))
		}
	}
	if !st.Existed[shimSocketDir] {
		_ = os.Remove(shimSocketDir)
	}
	if !st.Existed[containerdRun] {
		// The run made it (shim sockets, and fifo/ and runc/ when someone used ctr run); a
		// containerd of someone else's would have its socket there.
		if _, err := os.Stat(filepath.Join(containerdRun, "containerd.sock")); errors.Is(err, os.ErrNotExist) {
			note(os.RemoveAll(containerdRun))
		}
	}
	// Log symlinks into dir, then the directories if the run made them.
	for _, n := range dirNames(containerLogs) {
		p := filepath.Join(containerLogs, n)
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			note(os.Remove(p))
		}
	}
	for _, p := range []string{containerLogs, podLogs} {
		if !st.Existed[p] {
			_ = os.Remove(p) // only when empty: someone else may have started writing there
		}
	}
	if st.Existed[cniStateDir] {
		for _, sub := range []string{"results", "networks/" + cniNetwork} {
			d := filepath.Join(cniStateDir, sub)
			for _, n := range dirNames(d) {
				if sub != "results" || strings.HasPrefix(n, cniNetwork+"-") {
					note(os.RemoveAll(filepath.Join(d, n)))
				}
			}
		}
	} else {
		note(os.RemoveAll(cniStateDir))
	}
	// Mounts first (a kubelet may have made new ones while dying), then the files.
	note(unmountUnder(dir))
	note(removeAllBut(dir, st.Keep))
	if filepath.Dir(dir) == defaultDirRoot {
		_ = os.Remove(defaultDirRoot) // only when empty
	}
	return errors.Join(errs...)
}

// removeAllBut removes dir, or, when keep names some of its entries, every other entry.
func removeAllBut(dir string, keep []string) error {
	if len(keep) == 0 {
		return os.RemoveAll(dir)
	}
	var errs []error
	for _, n := range dirNames(dir) {
		if !slices.Contains(keep, n) {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, n)))
		}
	}
	return errors.Join(errs...)
}

// killLeftovers SIGKILLs every process of the cluster: those in its cgroups (containers),
// and those whose command line names dir (containerd, kubelet, shims, which are told
// containerd's socket under dir). It waits until they are gone.
func killLeftovers(ctx context.Context, dir, name string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := clusterPids(dir, name)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive after SIGKILL: %v", pids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func clusterPids(dir, name string) []int {
	self := os.Getpid()
	seen := map[int]bool{}
	var pids []int
	add := func(pid int) {
		if pid > 1 && pid != self && !seen[pid] && !isZombie(pid) {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	for _, h := range cgroupHierarchies() {
		for _, root := range ourCgroups(h, name) {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						add(pid)
					}
				}
				return nil
			})
		}
	}
	entries, _ := os.ReadDir(procRoot)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == dir || strings.HasPrefix(arg, dir+"/") || strings.Contains(arg, "="+dir+"/") {
				add(pid)
				break
			}
		}
	}
	return pids
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first, until none is left.
func unmountUnder(dir string) error {
	for range 10 {
		ours := mountPoints(mountinfo.PrefixFilter(dir))
		if len(ours) == 0 {
			return nil
		}
		slices.SortFunc(ours, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, m := range ours {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", m, err)
			}
		}
	}
	return fmt.Errorf("mounts under %s keep coming back", dir)
}

// mountPoints lists the mount points of this mount namespace that filter keeps (nil: every
// one), from /proc/self/mountinfo.
func mountPoints(filter mountinfo.FilterFunc) []string {
	infos, _ := mountinfo.GetMounts(filter)
	out := make([]string, 0, len(infos))
	for _, m := range infos {
		out = append(out, m.Mountpoint)
	}
	return out
}

func isMountPoint(p string) bool { return len(mountPoints(mountinfo.SingleEntryFilter(p))) > 0 }

// cgroupHierarchies lists the mounted cgroup file systems (v1 hierarchies and, on a hybrid
// host, the unified one).
func cgroupHierarchies() []string {
	var out []string
	for _, h := range cgroups.Hierarchies() {
		if h != cgroupRoot {
			out = append(out, h)
		}
	}
	return out
}

// ourCgroups are the cgroups of hierarchy h the cluster owns: one root per node.
func ourCgroups(h, name string) []string {
	var out []string
	for _, n := range dirNames(h) {
		if strings.HasPrefix(n, name+"-n") {
			if _, err := strconv.Atoi(strings.TrimPrefix(n, name+"-n")); err == nil {
				out = append(out, filepath.Join(h, n))
			}
		}
	}
	return out
}

// removeCgroups removes the nodes' cgroup roots, and kubepods and k8s.io at the top when the
// run created them, deepest first.
func removeCgroups(st hostState) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		roots := ourCgroups(h, st.Name)
		for _, top := range []string{"kubepods", "k8s.io"} {
			if p := filepath.Join(h, top); !st.Existed[p] {
				if _, err := os.Stat(p); err == nil {
					roots = append(roots, p)
				}
			}
		}
		for _, r := range roots {
			if err := cgroups.RemoveTree(r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// makeCgroupRoot creates /<root> in every hierarchy; a new cpuset needs cpus and mems.
func makeCgroupRoot(root string) error {
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, root)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", p, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(p, f), parent, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", p, f, err)
			}
		}
	}
	return nil
}

func sysctlPath(k string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))
}

func readSysctl(k string) (string, error) {
	b, err := os.ReadFile(sysctlPath(k))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(k, v string) error {
	return os.WriteFile(sysctlPath(k), []byte(v), 0o644)
}

func listChains(tool, table string) ([]string, error) {
	out, err := exec.Command(tool, "-w", "5", "-t", table, "-S").Output()
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "-N" {
			chains = append(chains, f[1])
		}
	}
	return chains, nil
}

// restoreChains deletes every KUBE-* chain the run added to the host's tables, with the
// rules that jump to it.
func restoreChains(log *slog.Logger, st hostState) error {
	var errs []error
	for key, before := range st.Chains {
		tool, table, _ := strings.Cut(key, "/")
		now, err := listChains(tool, table)
		if err != nil {
			continue
		}
		var added []string
		for _, c := range now {
			if strings.HasPrefix(c, "KUBE-") && !slices.Contains(before, c) {
				added = append(added, c)
			}
		}
		if len(added) == 0 {
			continue
		}
		log.Info("deleting iptables chains the run added", "tool", tool, "table", table, "chains", added)
		out, _ := exec.Command(tool, "-w", "5", "-t", table, "-S").Output()
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			for i := range f {
				if (f[i] == "-j" || f[i] == "-g") && i+1 < len(f) && slices.Contains(added, f[i+1]) {
					args := append([]string{"-w", "5", "-t", table, "-D"}, f[1:]...)
					if b, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, b))
					}
					break
				}
			}
		}
		for _, c := range added {
			_ = exec.Command(tool, "-w", "5", "-t", table, "-F", c).Run()
		}
		for _, c := range added {
			if b, err := exec.Command(tool, "-w", "5", "-t", table, "-X", c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s -X %s: %v: %s", tool, table, c, err, b))
			}
		}
	}
	return errors.Join(errs...)
}

func dirNames(d string) []string {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// run runs a command and returns an error quoting its output.
func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}
