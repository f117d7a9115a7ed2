package api

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
)

// ClusterDomain is every guest cluster's DNS domain: Services are
// <name>.<namespace>.svc.<ClusterDomain>.
const ClusterDomain = "cluster.local"

// DNSServiceIndex is the guest DNS Service's address in the service CIDR: its tenth, as
// kubeadm chooses (10.96.0.10 in the default CIDR).
const DNSServiceIndex = 10

// serviceCIDR is the networking's service CIDR (DefaultServiceCIDR when empty; the
// primary family of a dual-stack pair).
func (n Networking) serviceCIDR() string {
	if n.ServiceCIDR == "" {
		return DefaultServiceCIDR
	}
	first, _, _ := strings.Cut(n.ServiceCIDR, ",")
	return strings.TrimSpace(first)
}

// ServiceIP is the i-th address of the service CIDR (DefaultServiceCIDR when empty; the
// primary family of a dual-stack pair): 1 is the kubernetes Service's ClusterIP,
// DNSServiceIndex the DNS Service's.
func (n Networking) ServiceIP(i int) (netip.Addr, error) {
	cidr := n.serviceCIDR()
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a CIDR", cidr)
	}
	a := p.Masked().Addr()
	for range i {
		a = a.Next()
	}
	if !a.IsValid() || !p.Contains(a) || i < 1 {
		return netip.Addr{}, fmt.Errorf("%q has no service address %d", cidr, i)
	}
	return a, nil
}

// Node pod ranges: kube-controller-manager gives every Node a range of the pod network of
// this size (a /24 of IPv4, 254 pods; a /64 of IPv6), and kube-controller-manager refuses a
// node range more than maxNodeCIDRBitsBelowPodCIDR bits smaller than the pod network.
const (
	nodeCIDRBitsIPv4            = 24
	nodeCIDRBitsIPv6            = 64
	maxNodeCIDRBitsBelowPodCIDR = 16
	// minNodeRangeBits: a pod network holds at least 2^minNodeRangeBits node ranges.
	minNodeRangeBits = 2
)

// NodeCIDRMaskSize is the prefix length of each node's pod range
// (kube-controller-manager --node-cidr-mask-size): /24 for IPv4 and /64 for IPv6, or 16 bits
// below the pod network's when that is larger. It is 0 when the pod CIDR does not parse.
func (n Networking) NodeCIDRMaskSize() int {
	first, _, _ := strings.Cut(n.PodCIDR, ",")
	p, err := netip.ParsePrefix(strings.TrimSpace(cmp.Or(first, DefaultPodCIDR)))
	if err != nil {
		return 0
	}
	size := nodeCIDRBitsIPv4
	if !p.Addr().Is4() {
		size = nodeCIDRBitsIPv6
	}
	return min(size, p.Bits()+maxNodeCIDRBitsBelowPodCIDR)
}
