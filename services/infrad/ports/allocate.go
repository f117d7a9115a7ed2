// Package ports allocates a control plane's endpoint and ports on the local platform's host.
//
// A cluster's api.Infra record holds every port its control plane uses: etcd members,
// kube-apiserver replicas, controller-manager, scheduler and autoscaler ports, the Ignition
// endpoint, the endpoint clients use (a load balancer port in front of the apiservers) and,
// for a HighlyAvailable cluster, the balancer's internal port the daemons use.
// TopologyFor says how many of each a controllerAvailabilityPolicy needs; an Allocator hands
// out ports the kernel reports free and no record holds, and Allocate fills in only what a
// record misses, so a record, once written, keeps its ports.
package ports

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/portrange"
)

// Topology is how many of each part one control plane has.
type Topology struct {
	etcd, apiServers, controllerManagers, schedulers int
	// autoscaler is the autoscaler's ports: metrics and health probe.
	autoscaler int
	// loadBalanced puts infrad's TCP load balancer on the endpoint, in front of the apiservers.
	loadBalanced bool
	// internal gives the balancer a second, internal port for the daemons (Infra.InternalEndpoint):
	// there is no single apiserver they could go to instead.
	internal bool
}

// TopologyFor maps a controllerAvailabilityPolicy to the parts it needs ("" is SingleReplica).
func TopologyFor(policy string) Topology {
	if policy == api.HighlyAvailable {
		return Topology{etcd: 3, apiServers: 2, controllerManagers: 2, schedulers: 2, autoscaler: 2, loadBalanced: true, internal: true}
	}
	// Behind the load balancer too, so infrad can hold the endpoint while the cluster
	// hibernates and wake it on the first connection (docs/hibernation.md).
	return Topology{etcd: 1, apiServers: 1, controllerManagers: 1, schedulers: 1, autoscaler: 2, loadBalanced: true}
}

// SatisfiedBy reports whether inf already holds exactly the ports t needs, so nothing is
// allocated again: a record, once written, keeps its ports.
func (t Topology) SatisfiedBy(inf *api.Infra) bool {
	if len(inf.Etcd) != t.etcd || len(inf.APIServers) != t.apiServers ||
		len(inf.ControllerManagerPorts) != t.controllerManagers || len(inf.SchedulerPorts) != t.schedulers ||
		len(inf.AutoscalerPorts) != t.autoscaler {
		return false
	}
	if inf.Endpoint.Port == 0 || inf.Ignition.Port == 0 {
		return false
	}
	if t.internal != (inf.InternalEndpoint != nil) || (t.internal && inf.InternalEndpoint.Port == 0) {
		// An HA record from before the internal port gets it now; a cluster that became
		// SingleReplica drops it.
		return false
	}
	if t.apiServers == 1 && inf.Endpoint == inf.APIServers[0] {
		// A SingleReplica record from before its endpoint went behind the load balancer:
		// it keeps its endpoint (clients hold kubeconfigs naming it), without wake on connect.
		return true
	}
	if t.loadBalanced {
		return !isAPIServerPort(inf, inf.Endpoint.Port)
	}
	return inf.Endpoint == inf.APIServers[0]
}

// IsLoadBalanced reports whether inf's endpoint is a load balancer in front of its
// apiservers rather than an apiserver's own port.
func IsLoadBalanced(inf *api.Infra) bool {
	return inf.Endpoint.Port != 0 && len(inf.APIServers) > 0 && !isAPIServerPort(inf, inf.Endpoint.Port)
}

func isAPIServerPort(inf *api.Infra, port int) bool {
	return slices.ContainsFunc(inf.APIServers, func(e api.Endpoint) bool { return e.Port == port })
}

// Of lists every port inf records.
func Of(inf *api.Infra) []int {
	ports := []int{inf.Endpoint.Port, inf.Ignition.Port}
	if inf.InternalEndpoint != nil {
		ports = append(ports, inf.InternalEndpoint.Port)
	}
	for _, e := range inf.APIServers {
		ports = append(ports, e.Port)
	}
	for _, m := range inf.Etcd {
		ports = append(ports, m.ClientPort, m.PeerPort)
	}
	ports = append(ports, inf.ControllerManagerPorts...)
	ports = append(ports, inf.SchedulerPorts...)
	ports = append(ports, inf.AutoscalerPorts...)
	return ports
}

// Allocator hands out ports the kernel reports free on its host and no record holds, from
// portrange.Range: never from the kernel's ephemeral range, so a balancer, apiserver or etcd
// that restarts (infrad's takeover, componentd restarting a process) finds its port free.
// It is not safe for concurrent use: whoever allocates for several records at once
// serialises the allocations (and reserves every other record's ports first).
type Allocator struct {
	host string
	// lo and hi bound the ports handed out (portrange.Range).
	lo, hi int
	// endpointHost and ignitionHost are the hosts recorded for the endpoints clients dial
	// ("": host); see Advertise.
	endpointHost, ignitionHost string
	used                       map[int]bool
}

// NewAllocator returns an allocator of ports on host, from Range.
func NewAllocator(host string) *Allocator {
	lo, hi := portrange.Range()
	return &Allocator{host: host, lo: lo, hi: hi, used: map[int]bool{0: true}}
}

// Advertise makes the allocator record endpoint as the host of the cluster's endpoint (and
// of the balancer's internal one) and ignition as the Ignition endpoint's, instead of its own
// host, where the ports are still probed: names that resolve to the leading infrad and
// ignitiond replica when those run as pods (deploy/k8s), so an endpoint survives a takeover.
// "" keeps the allocator's host.
func (a *Allocator) Advertise(endpoint, ignition string) *Allocator {
	a.endpointHost, a.ignitionHost = endpoint, ignition
	return a
}

// Readvertise sets the hosts of inf's endpoints to the advertised ones (Advertise; "" keeps
// them) and reports whether it changed anything: a record allocated under another setting
// follows the current one, and pkid issues its certificates and kubeconfigs again.
func Readvertise(inf *api.Infra, endpoint, ignition string) bool {
	changed := false
	set := func(e *api.Endpoint, host string) {
		if e != nil && e.Port != 0 && host != "" && e.Host != host {
			e.Host, changed = host, true
		}
	}
	if IsLoadBalanced(inf) {
		set(&inf.Endpoint, endpoint)
		set(inf.InternalEndpoint, endpoint)
	}
	set(&inf.Ignition, ignition)
	return changed
}

// AtService records every apiserver replica of inf as host:port, the Service in front of
// them, and reports whether it changed anything: under componentd's kubernetes runtime the
// apiservers are pods behind their cluster's kube-apiserver Service, not processes on the
// allocator's host, so the load balancer forwards there and the daemons reach a
// SingleReplica cluster's apiserver there (pkg/guest), with no port of the host's.
func AtService(inf *api.Infra, host string, port int) bool {
	at := api.Endpoint{Host: host, Port: port}
	changed := false
	for i := range inf.APIServers {
		if inf.APIServers[i] != at {
			inf.APIServers[i], changed = at, true
		}
	}
	return changed
}

// Reserve marks ports as taken.
func (a *Allocator) Reserve(ports ...int) {
	for _, p := range ports {
		a.used[p] = true
	}
}

// next picks a free port of the range: a random one no record holds that a listener can
// bind now (the listener is closed at once).
func (a *Allocator) next() (int, error) {
	port, err := portrange.Pick(a.host, a.lo, a.hi, func(p int) bool { return a.used[p] })
	if err != nil {
		return 0, err
	}
	a.used[port] = true
	return port, nil
}

// Allocate gives inf the ports t needs on the allocator's host. Ports inf already has are
// kept (a policy change adds or drops replicas at the end); only what is missing is
// allocated.
func (a *Allocator) Allocate(inf *api.Infra, t Topology) error {
	host := a.host
	endpointHost, ignitionHost := cmp.Or(a.endpointHost, host), cmp.Or(a.ignitionHost, host)
	a.Reserve(Of(inf)...)
	inf.Etcd = inf.Etcd[:min(len(inf.Etcd), t.etcd)]
	for i := len(inf.Etcd); i < t.etcd; i++ {
		client, err := a.next()
		if err != nil {
			return err
		}
		peer, err := a.next()
		if err != nil {
			return err
		}
		inf.Etcd = append(inf.Etcd, api.EtcdMember{Name: "etcd-" + strconv.Itoa(i), Host: host, ClientPort: client, PeerPort: peer})
	}
	inf.APIServers = inf.APIServers[:min(len(inf.APIServers), t.apiServers)]
	for len(inf.APIServers) < t.apiServers {
		p, err := a.next()
		if err != nil {
			return err
		}
		inf.APIServers = append(inf.APIServers, api.Endpoint{Host: host, Port: p})
	}
	var err error
	if inf.ControllerManagerPorts, err = fill(inf.ControllerManagerPorts, t.controllerManagers, a); err != nil {
		return err
	}
	if inf.SchedulerPorts, err = fill(inf.SchedulerPorts, t.schedulers, a); err != nil {
		return err
	}
	if inf.AutoscalerPorts, err = fill(inf.AutoscalerPorts, t.autoscaler, a); err != nil {
		return err
	}
	if inf.Ignition.Port == 0 {
		p, err := a.next()
		if err != nil {
			return err
		}
		inf.Ignition = api.Endpoint{Host: ignitionHost, Port: p}
	}
	switch {
	case !t.loadBalanced:
		inf.Endpoint = inf.APIServers[0]
	case inf.Endpoint.Port == 0 || isAPIServerPort(inf, inf.Endpoint.Port):
		p, err := a.next()
		if err != nil {
			return err
		}
		inf.Endpoint = api.Endpoint{Host: endpointHost, Port: p}
	}
	switch {
	case !t.internal:
		inf.InternalEndpoint = nil
	case inf.InternalEndpoint == nil || inf.InternalEndpoint.Port == 0:
		p, err := a.next()
		if err != nil {
			return err
		}
		inf.InternalEndpoint = &api.Endpoint{Host: endpointHost, Port: p}
	}
	return nil
}

// fill trims or extends ports to n, allocating the new ones.
func fill(ports []int, n int, a *Allocator) ([]int, error) {
	ports = ports[:min(len(ports), n)]
	for len(ports) < n {
		p, err := a.next()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}
