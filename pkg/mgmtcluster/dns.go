package mgmtcluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
type dnsServer struct {
	cs   kubernetes.Interface
	conn net.PacketConn
}

func startDNS(ctx context.Context, cs kubernetes.Interface, addr string) (*dnsServer, error) {
	conn, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, err
	}
	s := &dnsServer{cs: cs, conn: conn}
	go s.serve(ctx)
	return s, nil
}

func (s *dnsServer) Close() error { return s.conn.Close() }

func (s *dnsServer) serve(ctx context.Context) {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := s.answer(ctx, buf[:n]); resp != nil {
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

func (s *dnsServer) answer(ctx context.Context, query []byte) []byte {
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
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, known = s.lookup(qctx, strings.ToLower(q.Name.String()))
		cancel()
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
func (s *dnsServer) lookup(ctx context.Context, name string) (ips []netip.Addr, known bool) {
	name = strings.TrimSuffix(name, ".")
	name = strings.TrimSuffix(name, "."+ClusterDomain)
	rest, ok := strings.CutSuffix(name, ".svc")
	if !ok {
		return nil, false
	}
	labels := strings.Split(rest, ".")
	var host, svc, ns string
	switch len(labels) {
	case 2:
		svc, ns = labels[0], labels[1]
	case 3:
		host, svc, ns = labels[0], labels[1], labels[2]
	default:
		return nil, false
	}
	slices, err := s.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, false
	}
	var ready, all []netip.Addr
	for _, sl := range slices.Items {
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
		_, err := s.cs.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
		return nil, err == nil
	}
	return ready, true
}
