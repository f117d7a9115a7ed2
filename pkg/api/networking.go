package api

import (
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
