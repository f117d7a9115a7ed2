package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// plan is what one node's pod network is made of, computed from the cluster's Nodes.
type plan struct {
	// podCIDR is this node's range (kube-controller-manager's allocation), "" until it has one.
	podCIDR netip.Prefix
	// routes are the other nodes' ranges, each through that node's internal address.
	routes map[netip.Prefix]netip.Addr
}

// makePlan is node self's plan among nodes. A node with no range or no internal address of
// the range's family gets no route (yet); a range claimed twice is routed to neither.
func makePlan(self string, nodes []*corev1.Node) plan {
	p := plan{routes: map[netip.Prefix]netip.Addr{}}
	claimed := map[netip.Prefix]int{}
	for _, n := range nodes {
		cidr, ok := nodeCIDR(n)
		if !ok {
			continue
		}
		claimed[cidr]++
		if n.Name == self {
			p.podCIDR = cidr
			continue
		}
		if ip, ok := internalIP(n, cidr.Addr().Is4()); ok {
			p.routes[cidr] = ip
		}
	}
	for cidr, n := range claimed {
		if n > 1 {
			delete(p.routes, cidr)
		}
	}
	delete(p.routes, p.podCIDR)
	return p
}

// nodeCIDR is n's pod range: the first of spec.podCIDRs (the primary family), else
// spec.podCIDR.
func nodeCIDR(n *corev1.Node) (netip.Prefix, bool) {
	s := n.Spec.PodCIDR
	if len(n.Spec.PodCIDRs) > 0 {
		s = n.Spec.PodCIDRs[0]
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}

// internalIP is n's first InternalIP of the family (v4 or not).
func internalIP(n *corev1.Node, v4 bool) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err == nil && ip.Unmap().Is4() == v4 {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// cniConfig is the CNI network list of a node whose pods take addresses from podCIDR: a
// bridge whose gateway is the node (no masquerade: netd masquerades only traffic leaving
// the cluster's pod network), host-local addresses, host ports through portmap.
func cniConfig(podCIDR netip.Prefix) ([]byte, error) {
	def := "0.0.0.0/0"
	if !podCIDR.Addr().Is4() {
		def = "::/0"
	}
	b, err := json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       "hostplane",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": bridgeName, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR.String()}}},
					"routes": []map[string]string{{"dst": def}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("CNI config: %w", err)
	}
	return append(b, '\n'), nil
}

// sortedPrefixes is m's keys in order (for logs and tests).
func sortedPrefixes[V any](m map[netip.Prefix]V) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}
