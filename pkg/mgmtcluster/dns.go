package mgmtcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// ClusterDomain is the cluster's DNS domain; pods get "<ns>.svc.<ClusterDomain>" searches.
const ClusterDomain = "cluster.local"

// dnsServer answers pods' queries for Services, and for the pods behind a headless Service,
// from the cluster's EndpointSlices: "<svc>.<ns>.svc" is the addresses of the Service's ready
// endpoints (every endpoint when none is ready), "<host>.<svc>.<ns>.svc" the endpoint with
// that hostname (a StatefulSet's pod), each with or without ".cluster.local". There is no
// kube-proxy, so a Service name resolves to its pods rather than its cluster IP (Services whose
// port differs from their target port are not reachable that way). Every other name is
// NXDOMAIN: nothing is forwarded anywhere.
//
// Answers come from informers' caches of the EndpointSlices and Services, never from a request
// to the apiserver per query: a busy control plane's pods (etcd members resolving their peers,
// every client its apiserver) ask many times a second, and a server that asked the apiserver
// each time fell behind on a loaded host until lookups timed out.
type dnsServer struct {
	conn     net.PacketConn
	informer informers.SharedInformerFactory
	slices   discoverylisters.EndpointSliceLister
	services corelisters.ServiceLister
}

func startDNS(ctx context.Context, cs kubernetes.Interface, addr string) (*dnsServer, error) {
	f := informers.NewSharedInformerFactory(cs, 0)
	s := &dnsServer{
		informer: f,
		slices:   f.Discovery().V1().EndpointSlices().Lister(),
		services: f.Core().V1().Services().Lister(),
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			f.Shutdown()
			return nil, fmt.Errorf("cache of %v not synced: %w", typ, context.Cause(ctx))
		}
	}
	conn, err := net.ListenPacket("udp4", addr)
	if err != nil {
		f.Shutdown()
		return nil, err
	}
	s.conn = conn
	go s.serve()
	return s, nil
}

// Close stops serving; the informers stop once the context given to startDNS is done.
func (s *dnsServer) Close() error {
	err := s.conn.Close()
	s.informer.Shutdown()
	return err
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

func (s *dnsServer) answer(query []byte) []byte {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	resp := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionDesired: hdr.RecursionDesired}
	var ips []netip.Addr
	known := false
	if q.Class == dnsmessage.ClassINET {
		ips, known = s.lookup(strings.ToLower(q.Name.String()))
	}
	if !known {
		resp.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), resp)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA {
		for _, ip := range ips {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5}
			if b.AResource(rh, dnsmessage.AResource{A: ip.As4()}) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookup resolves name ("a.b.svc." or "a.b.svc.cluster.local."); known is false for a name
// that does not exist (only A answers carry addresses; other types get none).
func (s *dnsServer) lookup(name string) (ips []netip.Addr, known bool) {
	name = strings.TrimSuffix(name, ".")
	name = strings.TrimSuffix(name, "."+ClusterDomain)
	rest, ok := strings.CutSuffix(name, ".svc")
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, ".")
	var host, svc, ns string
	switch len(parts) {
	case 2:
		svc, ns = parts[0], parts[1]
	case 3:
		host, svc, ns = parts[0], parts[1], parts[2]
	default:
		return nil, false
	}
	slices, err := s.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc}))
	if err != nil {
		return nil, false
	}
	var ready, all []netip.Addr
	for _, sl := range slices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range sl.Endpoints {
			if host != "" && (ep.Hostname == nil || *ep.Hostname != host) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				all = append(all, ip)
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					ready = append(ready, ip)
				}
			}
		}
	}
	if host != "" || len(ready) == 0 {
		ready = all
	}
	if len(ready) == 0 {
		// The Service may exist without endpoints yet: an empty answer, not NXDOMAIN, so
		// resolvers retry rather than cache a negative answer for long.
		_, err := s.services.Services(ns).Get(svc)
		return nil, err == nil
	}
	return ready, true
}
