package mgmtcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The test's own address ranges: the node link and one pod range per node.
const (
	linkPrefix = "10.231.0" // host .1, node i .(10+i), /24
	podPrefix  = "10.232"   // node i: 10.232.i.0/24
	bridgeName = "br0"      // in the switch namespace
	cniBridge  = "cni0"     // in each node's namespace
	nodeIface  = "eth0"     // each node's end of its link
	switchNS   = "sw"       // <Name>-sw
	nodeNSPart = "n"        // <Name>-n<i>
	hostIP     = linkPrefix + ".1"
)

func hostLink(name string) string         { return name + "0" }
func switchNetns(name string) string      { return name + "-" + switchNS }
func nodeNetns(name string, i int) string { return name + "-" + nodeNSPart + strconv.Itoa(i) }
func nodeIP(i int) string                 { return linkPrefix + "." + strconv.Itoa(10+i) }
func podCIDR(i int) string                { return podPrefix + "." + strconv.Itoa(i) + ".0/24" }

// isOurNetns reports whether a /run/netns entry is a namespace a cluster called name made.
func isOurNetns(name, n string) bool {
	if n == switchNetns(name) {
		return true
	}
	rest, ok := strings.CutPrefix(n, name+"-"+nodeNSPart)
	if !ok {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

// setupNetwork builds the switch, the host's link to it and one namespace per node, with
// routes between the pod ranges. Nothing gets a default route.
func setupNetwork(name string, nodes int) error {
	sw := switchNetns(name)
	host := hostLink(name)
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", bridgeName, "type", "bridge"},
		{"-n", sw, "link", "set", bridgeName, "up"},
		{"link", "add", host, "type", "veth", "peer", "name", host + "p", "netns", sw},
		{"-n", sw, "link", "set", host + "p", "master", bridgeName, "up"},
		{"addr", "add", hostIP + "/24", "dev", host},
		{"link", "set", host, "up"},
	}
	for i := 1; i <= nodes; i++ {
		ns := nodeNetns(name, i)
		port := ns // the switch's port towards node i
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", nodeIface, "netns", ns},
			[]string{"-n", sw, "link", "set", port, "master", bridgeName, "up"},
			[]string{"-n", ns, "addr", "add", nodeIP(i) + "/24", "dev", nodeIface},
			[]string{"-n", ns, "link", "set", nodeIface, "up"},
			[]string{"route", "add", podCIDR(i), "via", nodeIP(i), "dev", host},
		)
		for j := 1; j <= nodes; j++ {
			if j != i {
				steps = append(steps, []string{"-n", ns, "route", "add", podCIDR(j), "via", nodeIP(j)})
			}
		}
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	// Nodes forward between their pods' bridge and the link.
	for i := 1; i <= nodes; i++ {
		if err := inNetns(nodeNetns(name, i), func() error {
			return writeSysctl("net.ipv4.ip_forward", "1")
		}); err != nil {
			return fmt.Errorf("node %d ip_forward: %w", i, err)
		}
	}
	return nil
}

// inNetns runs f on a locked OS thread that has joined network namespace ns (the
// namespace-scoped /proc/sys/net belongs to the calling thread's namespace). The thread is
// thrown away afterwards rather than moved back.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		lockThreadForever()
		fd, err := unix.Open(filepath.Join(netnsDir, ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// deleteNetns removes a namespace file: unmount (it is a bind mount of the namespace) and
// unlink. Links inside die with the namespace once nothing holds it.
func deleteNetns(n string) error {
	p := filepath.Join(netnsDir, n)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	return run("ip", "link", "del", name)
}

// SetNodeLink brings node i's link to the switch down (cut) or up: the node and its pods lose
// (or regain) the apiserver and every other node, while its processes keep running.
func (c *Cluster) SetNodeLink(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run("ip", "-n", switchNetns(c.cfg.Name), "link", "set", nodeNetns(c.cfg.Name, i), state)
}
