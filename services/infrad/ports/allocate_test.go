package ports

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/portrange"
)

// host is where the tests allocate: infrad's default endpoint host.
const host = "127.0.0.1"

func TestAllocate_KeepsRecordedPortsAndAllocatesOnlyWhatIsMissing(t *testing.T) {
	tests := []struct {
		name       string
		from, to   string
		wantEtcd   int
		wantAPI    int
		wantLBPort bool
	}{
		{"new single replica", "", api.SingleReplica, 1, 1, true},
		{"new highly available", "", api.HighlyAvailable, 3, 2, true},
		{"single replica grows", api.SingleReplica, api.HighlyAvailable, 3, 2, true},
		{"highly available shrinks", api.HighlyAvailable, api.SingleReplica, 1, 1, true},
		{"unchanged", api.HighlyAvailable, api.HighlyAvailable, 3, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inf := &api.Infra{}
			if tt.from != "" {
				if err := NewAllocator(host).Allocate(inf, TopologyFor(tt.from)); err != nil {
					t.Fatal(err)
				}
			}
			before := *inf
			before.Etcd = slices.Clone(inf.Etcd)
			before.APIServers = slices.Clone(inf.APIServers)
			to := TopologyFor(tt.to)
			if err := NewAllocator(host).Allocate(inf, to); err != nil {
				t.Fatal(err)
			}
			if !to.SatisfiedBy(inf) {
				t.Fatalf("allocation %+v does not satisfy %s", inf, tt.to)
			}
			if len(inf.Etcd) != tt.wantEtcd || len(inf.APIServers) != tt.wantAPI {
				t.Errorf("%d etcd, %d apiservers; want %d, %d", len(inf.Etcd), len(inf.APIServers), tt.wantEtcd, tt.wantAPI)
			}
			if got := !isAPIServerPort(inf, inf.Endpoint.Port); got != tt.wantLBPort {
				t.Errorf("endpoint %+v has its own port: %v, want %v", inf.Endpoint, got, tt.wantLBPort)
			}
			for i := range min(len(before.Etcd), len(inf.Etcd)) {
				if inf.Etcd[i] != before.Etcd[i] {
					t.Errorf("etcd member %d changed from %+v to %+v", i, before.Etcd[i], inf.Etcd[i])
				}
			}
			for i := range min(len(before.APIServers), len(inf.APIServers)) {
				if inf.APIServers[i] != before.APIServers[i] {
					t.Errorf("apiserver %d changed from %+v to %+v", i, before.APIServers[i], inf.APIServers[i])
				}
			}
			if tt.from == tt.to && inf.Endpoint != before.Endpoint {
				t.Errorf("endpoint changed from %+v to %+v", before.Endpoint, inf.Endpoint)
			}
			distinct := slices.Compact(slices.Sorted(slices.Values(Of(inf))))
			// apiservers, kcm and scheduler have one port per replica; one Ignition port; the
			// autoscaler's metrics and health ports.
			want := 2*tt.wantEtcd + 3*tt.wantAPI + 1 + 2
			if tt.wantLBPort {
				want++
			}
			if ha := tt.to == api.HighlyAvailable; ha != (inf.InternalEndpoint != nil) {
				t.Errorf("internal endpoint %+v for %s", inf.InternalEndpoint, tt.to)
			} else if ha {
				want++ // the balancer's internal port
				if tt.from == tt.to && *inf.InternalEndpoint != *before.InternalEndpoint {
					t.Errorf("internal endpoint changed from %+v to %+v", *before.InternalEndpoint, *inf.InternalEndpoint)
				}
			}
			if len(distinct) != want {
				t.Errorf("%d distinct ports %v, want %d", len(distinct), distinct, want)
			}
		})
	}
}

// A SingleReplica record from before endpoints went behind the load balancer keeps its
// endpoint (the apiserver's port), so kubeconfigs handed out stay valid.
func TestSatisfiedBy_KeepsASingleReplicaRecordWhoseEndpointIsTheAPIServer(t *testing.T) {
	inf := &api.Infra{}
	if err := NewAllocator(host).Allocate(inf, TopologyFor(api.SingleReplica)); err != nil {
		t.Fatal(err)
	}
	inf.Endpoint = inf.APIServers[0]
	if !TopologyFor(api.SingleReplica).SatisfiedBy(inf) {
		t.Errorf("a legacy SingleReplica record %+v would be allocated again", inf)
	}
	if IsLoadBalanced(inf) {
		t.Errorf("a legacy SingleReplica record %+v counts as load balanced", inf)
	}
}

// A HighlyAvailable record written before the balancer had an internal port is allocated
// one on the next reconcile, and keeps every port it had (kubeconfigs name its endpoint).
func TestAllocate_GivesAnHARecordFromBeforeTheInternalPortOneAndKeepsTheRest(t *testing.T) {
	ha := TopologyFor(api.HighlyAvailable)
	inf := &api.Infra{}
	if err := NewAllocator(host).Allocate(inf, ha); err != nil {
		t.Fatal(err)
	}
	inf.InternalEndpoint = nil
	before := slices.Clone(Of(inf))
	if ha.SatisfiedBy(inf) {
		t.Fatalf("an HA record without an internal port %+v is not allocated again", inf)
	}
	if err := NewAllocator(host).Allocate(inf, ha); err != nil {
		t.Fatal(err)
	}
	if !ha.SatisfiedBy(inf) || inf.InternalEndpoint == nil || inf.InternalEndpoint.Host != host {
		t.Fatalf("after the allocation %+v", inf)
	}
	if slices.Contains(before, inf.InternalEndpoint.Port) {
		t.Errorf("internal port %d is one the record already used: %v", inf.InternalEndpoint.Port, before)
	}
	if got := Of(inf); !slices.Equal(append(before[:2:2], append([]int{inf.InternalEndpoint.Port}, before[2:]...)...), got) {
		t.Errorf("ports %v, want %v plus the internal one", got, before)
	}
}

// With advertised hosts (infrad and ignitiond as pods, deploy/k8s) the endpoints clients dial
// name them, while the ports are still probed and the apiservers and etcd stay on the host;
// a record allocated before the setting follows it without a port changing.
func TestAllocate_RecordsTheAdvertisedHostsForTheEndpointsClientsDial(t *testing.T) {
	const lb, ign = "infrad-endpoints.hostplane-system.svc", "ignitiond-endpoints.hostplane-system.svc"
	ha := TopologyFor(api.HighlyAvailable)
	inf := &api.Infra{}
	if err := NewAllocator(host).Advertise(lb, ign).Allocate(inf, ha); err != nil {
		t.Fatal(err)
	}
	if inf.Endpoint.Host != lb || inf.InternalEndpoint.Host != lb || inf.Ignition.Host != ign {
		t.Errorf("endpoint %+v, internal %+v, ignition %+v: want the advertised hosts", inf.Endpoint, *inf.InternalEndpoint, inf.Ignition)
	}
	if inf.APIServers[0].Host != host || inf.Etcd[0].Host != host {
		t.Errorf("apiservers %+v, etcd %+v: want them on %s", inf.APIServers, inf.Etcd, host)
	}
	if Readvertise(inf, lb, ign) {
		t.Errorf("a record that already names the advertised hosts changed")
	}

	old := &api.Infra{}
	if err := NewAllocator(host).Allocate(old, ha); err != nil {
		t.Fatal(err)
	}
	ports := slices.Clone(Of(old))
	if !Readvertise(old, lb, ign) {
		t.Fatalf("a record on %s did not follow the advertised hosts", host)
	}
	if old.Endpoint.Host != lb || old.InternalEndpoint.Host != lb || old.Ignition.Host != ign || old.APIServers[0].Host != host {
		t.Errorf("after Readvertise %+v", old)
	}
	if !slices.Equal(ports, Of(old)) {
		t.Errorf("ports changed: %v, then %v", ports, Of(old))
	}
	if Readvertise(old, "", "") {
		t.Errorf("no advertised host changed the record")
	}
}

// Every port handed out is outside the kernel's ephemeral range, which outgoing connections
// take their local ports from: a listener that restarts (a balancer after infrad's takeover,
// an apiserver componentd restarts) finds its port free again.
func TestAllocate_NeverHandsOutAPortOfTheKernelsEphemeralRange(t *testing.T) {
	b, err := os.ReadFile(portrange.EphemeralRangeFile)
	if err != nil {
		t.Fatalf("the kernel's ephemeral range: %v", err)
	}
	var elo, ehi int
	if _, err := fmt.Sscan(string(b), &elo, &ehi); err != nil {
		t.Fatalf("%s: %q: %v", portrange.EphemeralRangeFile, b, err)
	}
	lo, hi := portrange.Range()
	if hi-lo+1 < 1000 {
		t.Fatalf("range %d-%d is too small", lo, hi)
	}
	a := NewAllocator(host)
	for range 20 {
		inf := &api.Infra{}
		if err := a.Allocate(inf, TopologyFor(api.HighlyAvailable)); err != nil {
			t.Fatal(err)
		}
		for _, p := range Of(inf) {
			if p >= elo && p <= ehi {
				t.Fatalf("port %d is in the ephemeral range %d-%d", p, elo, ehi)
			}
			if p < lo || p > hi {
				t.Fatalf("port %d is outside the allocation range %d-%d", p, lo, hi)
			}
		}
	}
}

func TestAtService_RecordsEveryAPIServerAsTheServiceAndKeepsTheRest(t *testing.T) {
	const svc, port = "kube-apiserver.hostplane-demo.svc", 6443
	for _, policy := range []string{api.SingleReplica, api.HighlyAvailable} {
		t.Run(policy, func(t *testing.T) {
			inf := &api.Infra{}
			topo := TopologyFor(policy)
			if err := NewAllocator(host).Allocate(inf, topo); err != nil {
				t.Fatal(err)
			}
			endpoint, ignition := inf.Endpoint, inf.Ignition
			if !AtService(inf, svc, port) {
				t.Fatal("AtService changed nothing on a record of host ports")
			}
			for i, e := range inf.APIServers {
				if e != (api.Endpoint{Host: svc, Port: port}) {
					t.Errorf("apiServers[%d] = %+v, want the Service", i, e)
				}
			}
			// Nothing else moves, and the record stays satisfied (no allocation again) and
			// load balanced (the endpoint is not an apiserver's).
			if inf.Endpoint != endpoint || inf.Ignition != ignition {
				t.Errorf("endpoint %+v, ignition %+v moved (were %+v, %+v)", inf.Endpoint, inf.Ignition, endpoint, ignition)
			}
			if !topo.SatisfiedBy(inf) || !IsLoadBalanced(inf) {
				t.Errorf("after AtService: satisfied %v, load balanced %v; want both", topo.SatisfiedBy(inf), IsLoadBalanced(inf))
			}
			if AtService(inf, svc, port) {
				t.Error("AtService changed a record already at the Service")
			}
		})
	}
}
