package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
)

const (
	// bridgeName is the bridge the CNI bridge plugin attaches a node's pods to.
	bridgeName = "cni0"
	// routeProtocol marks the routes netd owns, so that it replaces and removes only those
	// (a number no routing daemon registers in iproute2's rt_protos).
	routeProtocol netlink.RouteProtocol = 104
	// nftTable holds netd's masquerade rule.
	nftTable = "hostplane-netd"
	// cniFile is the network netd writes into the CNI configuration directory.
	cniFile = "10-hostplane.conflist"
)

// writeCNIConfig writes conf into dir (atomically: the runtime watches the directory and
// must never read half a file) and says whether it changed anything.
func writeCNIConfig(dir string, conf []byte) (bool, error) {
	path := filepath.Join(dir, cniFile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, conf) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp := filepath.Join(dir, "."+cniFile+".tmp") // no .conflist suffix: the runtime ignores it
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// syncRoutes makes netd's routes exactly want (destination → gateway): it replaces those
// missing or pointing elsewhere and deletes its own that want lacks. It returns how many
// it changed.
func syncRoutes(want map[netip.Prefix]netip.Addr) (int, error) {
	var have []netlink.Route
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RouteListFiltered(fam, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return 0, fmt.Errorf("list routes: %w", err)
		}
		have = append(have, rs...)
	}
	changed := 0
	var errs []error
	ok := map[netip.Prefix]bool{}
	for _, r := range have {
		dst, gw, valid := routeOf(r)
		if valid && want[dst] == gw && !ok[dst] {
			ok[dst] = true
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete route %v: %w", r.Dst, err))
			continue
		}
		changed++
	}
	for _, dst := range sortedPrefixes(want) {
		if ok[dst] {
			continue
		}
		gw := want[dst]
		r := &netlink.Route{Dst: prefixNet(dst), Gw: net.IP(gw.AsSlice()), Protocol: routeProtocol}
		if err := netlink.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", dst, gw, err))
			continue
		}
		changed++
	}
	return changed, errors.Join(errs...)
}

func routeOf(r netlink.Route) (netip.Prefix, netip.Addr, bool) {
	if r.Dst == nil {
		return netip.Prefix{}, netip.Addr{}, false
	}
	ip, ok1 := netip.AddrFromSlice(r.Dst.IP)
	gw, ok2 := netip.AddrFromSlice(r.Gw)
	ones, _ := r.Dst.Mask.Size()
	if !ok1 || !ok2 {
		return netip.Prefix{}, netip.Addr{}, false
	}
	return netip.PrefixFrom(ip.Unmap(), ones).Masked(), gw.Unmap(), true
}

func prefixNet(p netip.Prefix) *net.IPNet {
	bits := p.Addr().BitLen()
	return &net.IPNet{IP: net.IP(p.Masked().Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// syncMasquerade replaces netd's nftables table with one rule: traffic from this node's
// pods (podCIDR) to anywhere outside the cluster's pod network (clusterCIDR) leaves with the
// node's address, so that replies find their way back; pod-to-pod traffic keeps its pod
// addresses. One netlink transaction: the rule is never absent for a moment.
func syncMasquerade(podCIDR, clusterCIDR netip.Prefix) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	family, saddr, daddr := nftables.TableFamilyIPv4, uint32(12), uint32(16)
	if !podCIDR.Addr().Is4() {
		family, saddr, daddr = nftables.TableFamilyIPv6, 8, 24
	}
	size := uint32(podCIDR.Addr().BitLen() / 8)
	t := &nftables.Table{Name: nftTable, Family: family}
	c.AddTable(t)
	c.DelTable(t) // with the add before it: gone whether or not it was there
	t = c.AddTable(t)
	chain := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	match := func(offset uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
		return []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: prefixNet(p).Mask, Xor: make([]byte, size)},
			&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()},
		}
	}
	exprs := append(match(saddr, podCIDR, expr.CmpOpEq), match(daddr, clusterCIDR, expr.CmpOpNeq)...)
	c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: append(exprs, &expr.Masq{})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s: %w", nftTable, err)
	}
	return nil
}
