package main

import (
	"encoding/json"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testNode(name, cidr, ip string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if cidr != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestPlan_RoutesEveryOtherNodesRangeThroughItsAddress(t *testing.T) {
	p := makePlan("a", []*corev1.Node{
		testNode("a", "10.132.0.0/24", "172.17.0.2"),
		testNode("b", "10.132.1.0/24", "172.17.0.3"),
		testNode("c", "10.132.2.0/24", "172.17.0.4"),
		testNode("no-range-yet", "", "172.17.0.5"),
		testNode("no-address-yet", "10.132.3.0/24", ""),
	})
	if p.podCIDR != netip.MustParsePrefix("10.132.0.0/24") {
		t.Errorf("own range %v, want 10.132.0.0/24", p.podCIDR)
	}
	want := map[string]string{"10.132.1.0/24": "172.17.0.3", "10.132.2.0/24": "172.17.0.4"}
	if len(p.routes) != len(want) {
		t.Errorf("routes %v, want %v", p.routes, want)
	}
	for dst, gw := range want {
		if got := p.routes[netip.MustParsePrefix(dst)]; got != netip.MustParseAddr(gw) {
			t.Errorf("route to %s via %v, want %s", dst, got, gw)
		}
	}
}

func TestPlan_ARangeTwoNodesClaimIsRoutedToNeither(t *testing.T) {
	p := makePlan("a", []*corev1.Node{
		testNode("a", "10.132.0.0/24", "172.17.0.2"),
		testNode("b", "10.132.1.0/24", "172.17.0.3"),
		testNode("c", "10.132.1.0/24", "172.17.0.4"),
		testNode("d", "10.132.0.0/24", "172.17.0.5"), // claims a's own
	})
	if len(p.routes) != 0 {
		t.Errorf("routes %v, want none: no range is claimed once", p.routes)
	}
}

func TestPlan_ANodeWithNoRangeGetsNoConfigYet(t *testing.T) {
	p := makePlan("a", []*corev1.Node{testNode("a", "", "172.17.0.2"), testNode("b", "10.132.1.0/24", "172.17.0.3")})
	if p.podCIDR.IsValid() {
		t.Errorf("own range %v, want none", p.podCIDR)
	}
	if len(p.routes) != 1 {
		t.Errorf("routes %v, want b's", p.routes)
	}
}

func TestCNIConfig_ABridgeOverTheNodesRangeOnly(t *testing.T) {
	b, err := cniConfig(netip.MustParsePrefix("10.132.7.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins %+v, want bridge and portmap", conf.Plugins)
	}
	if conf.Plugins[0].IPMasq {
		t.Error("the bridge masquerades: pod-to-pod traffic across nodes would lose its source address")
	}
	if r := conf.Plugins[0].IPAM.Ranges; len(r) != 1 || len(r[0]) != 1 || r[0][0].Subnet != "10.132.7.0/24" {
		t.Errorf("address ranges %+v, want the node's 10.132.7.0/24", r)
	}
}
