package api

import "testing"

func TestNetworking_ServiceIP(t *testing.T) {
	tests := []struct {
		cidr string
		i    int
		want string // "" for an error
	}{
		{"", 1, "10.96.0.1"},
		{"", DNSServiceIndex, "10.96.0.10"},
		{"10.96.0.0/16", 1, "10.96.0.1"},
		{"172.30.5.7/16", 1, "172.30.0.1"},
		{"172.30.5.7/16", DNSServiceIndex, "172.30.0.10"},
		{"fd00:10:96::/112", 1, "fd00:10:96::1"},
		{"fd00:10:96::/112", DNSServiceIndex, "fd00:10:96::a"},
		{"10.100.0.0/24,fd00::/108", 1, "10.100.0.1"},
		{"10.0.0.0/32", 1, ""},
		{"10.0.0.0/29", DNSServiceIndex, ""},
		{"10.0.0.0/24", 0, ""},
		{"not-a-cidr", 1, ""},
	}
	for _, tt := range tests {
		got, err := Networking{ServiceCIDR: tt.cidr}.ServiceIP(tt.i)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("ServiceIP(%q, %d) = %v, want an error", tt.cidr, tt.i, got)
		case tt.want != "" && (err != nil || got.String() != tt.want):
			t.Errorf("ServiceIP(%q, %d) = %v, %v; want %s", tt.cidr, tt.i, got, err, tt.want)
		}
	}
}

func TestNetworking_NodeCIDRMaskSize(t *testing.T) {
	for cidr, want := range map[string]int{
		"":                       24, // the default pod network
		"10.132.0.0/14":          24,
		"10.0.0.0/8":             24,
		"10.0.0.0/6":             22, // kube-controller-manager allows 16 bits below the pod network
		"fd00::/48":              64,
		"fd00::/40":              56,
		"not a CIDR":             0,
		"10.1.0.0/16, fd00::/48": 24,
	} {
		if got := (Networking{PodCIDR: cidr}).NodeCIDRMaskSize(); got != want {
			t.Errorf("NodeCIDRMaskSize of %q = %d, want %d", cidr, got, want)
		}
	}
}
