package pkid

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
)

// lifetimes are one cluster's certificate lifetimes.
type lifetimes struct {
	CA, Leaf time.Duration
}

// lifetimesOf reads spec (nil: all defaults). A value that is absent, does not parse or is
// not positive falls back to def; each such problem is returned to be logged.
func lifetimesOf(spec *api.PKISpec, def lifetimes) (lifetimes, []string) {
	if spec == nil {
		return def, nil
	}
	// Plain statements, no closure appending to a captured slice: Go 1.26.8 miscompiles
	// that pattern when the function is inlined (the returned slice holds garbage).
	ca, caProblem := parseLifetime("caLifetime", spec.CALifetime, def.CA)
	leaf, leafProblem := parseLifetime("leafLifetime", spec.LeafLifetime, def.Leaf)
	var problems []string
	for _, p := range []string{caProblem, leafProblem} {
		if p != "" {
			problems = append(problems, p)
		}
	}
	return lifetimes{CA: ca, Leaf: leaf}, problems
}

// parseLifetime parses v, or returns def and the problem.
func parseLifetime(field, v string, def time.Duration) (time.Duration, string) {
	if v == "" {
		return def, ""
	}
	got, err := time.ParseDuration(v)
	if err != nil || got <= 0 {
		return def, fmt.Sprintf("spec.pki.%s %q is not a positive Go duration; using %v", field, v, def)
	}
	return got, ""
}

// caSpec is one CA pkid keeps.
type caSpec struct {
	Name       string // key in ClusterPKI.Certs
	CommonName string
}

func caSpecs(cluster string) []caSpec {
	out := make([]caSpec, 0, 4)
	for _, n := range []string{api.CertRootCA, api.CertEtcdCA, api.CertFrontProxyCA, api.CertKubeletSigner} {
		out = append(out, caSpec{Name: n, CommonName: cluster + "-" + n})
	}
	return out
}

// leafSpec is one leaf certificate pkid keeps: which CA signs it and what it says (the
// request's Lifetime is filled in at issuance).
type leafSpec struct {
	Name string
	CA   string
	Req  certs.Request
}

// kubeconfigSpec is one kubeconfig pkid keeps and the client certificate it embeds.
type kubeconfigSpec struct {
	Name, Cert, User string
}

var kubeconfigSpecs = []kubeconfigSpec{
	{Name: api.KubeconfigAdmin, Cert: api.CertAdmin, User: "admin"},
	{Name: api.KubeconfigControllerMgr, Cert: api.CertControllerManager, User: "system:kube-controller-manager"},
	{Name: api.KubeconfigScheduler, Cert: api.CertScheduler, User: "system:kube-scheduler"},
	{Name: api.KubeconfigKarpenter, Cert: api.CertKarpenter, User: "system:hostplane:karpenter"},
}

// Kubernetes identities of the client certificates.
const (
	groupMasters = "system:masters"
)

// leafSpecs returns every leaf of cluster c with infra inf. Problems (an invalid service
// CIDR) are returned to be logged; an unusable endpoint is an error.
func leafSpecs(c *api.Cluster, inf *api.Infra) ([]leafSpec, []string, error) {
	if inf.Endpoint.Host == "" || inf.Endpoint.Port <= 0 {
		return nil, nil, fmt.Errorf("%w: endpoint %q port %d", ErrInfraIncomplete, inf.Endpoint.Host, inf.Endpoint.Port)
	}
	var problems []string
	etcd := newSANs("localhost", "127.0.0.1")
	for _, m := range inf.Etcd {
		etcd.add(m.Host)
	}
	// The hosts of componentd's kubernetes runtime, so the same PKI serves both runtimes:
	// every etcd member "etcd-<i>.etcd-discovery.hostplane-<cluster>.svc" and the
	// kube-apiserver Service.
	if c.Name != "" {
		etcd.add("*."+api.EtcdDiscoveryHost(c.Name), api.EtcdDiscoveryHost(c.Name))
	}
	apiserver := newSANs(inf.Endpoint.Host)
	for _, e := range inf.APIServers {
		apiserver.add(e.Host)
	}
	apiserver.add("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local")
	if c.Name != "" {
		apiserver.add(api.KubeAPIServerHost(c.Name), api.KubeAPIServerHost(c.Name)+".cluster.local")
	}
	ip, err := c.Spec.Networking.ServiceIP(1)
	if err != nil {
		problems = append(problems, fmt.Sprintf("spec.networking.serviceCIDR: %v; using %s", err, api.DefaultServiceCIDR))
		ip, _ = api.Networking{}.ServiceIP(1)
	}
	apiserver.add(ip.String())

	ignition := newSANs("127.0.0.1", "localhost", inf.Endpoint.Host)
	if inf.Ignition.Host != "" {
		ignition.add(inf.Ignition.Host)
	}

	client := func(name, ca, cn string, orgs ...string) leafSpec {
		return leafSpec{Name: name, CA: ca, Req: certs.Request{CommonName: cn, Organizations: orgs, Usage: certs.UsageClient}}
	}
	return []leafSpec{
		{Name: api.CertEtcdServer, CA: api.CertEtcdCA, Req: etcd.request("etcd-server", certs.UsageClientServer)},
		{Name: api.CertEtcdPeer, CA: api.CertEtcdCA, Req: etcd.request("etcd-peer", certs.UsageClientServer)},
		client(api.CertAPIServerEtcdClient, api.CertEtcdCA, "kube-apiserver-etcd-client"),
		{Name: api.CertAPIServer, CA: api.CertRootCA, Req: apiserver.request("kube-apiserver", certs.UsageServer)},
		client(api.CertAPIServerKubelet, api.CertRootCA, "kube-apiserver-kubelet-client", groupMasters),
		client(api.CertFrontProxyClient, api.CertFrontProxyCA, "front-proxy-client"),
		client(api.CertAdmin, api.CertRootCA, "kubernetes-admin", groupMasters),
		client(api.CertControllerManager, api.CertRootCA, "system:kube-controller-manager"),
		client(api.CertScheduler, api.CertRootCA, "system:kube-scheduler"),
		// The autoscaler: the guest RBAC pkid applies for it (grants.go), no group.
		client(api.CertKarpenter, api.CertRootCA, KarpenterUser),
		{Name: api.CertIgnitionServer, CA: api.CertRootCA, Req: ignition.request("hostplane-ignition-server", certs.UsageServer)},
	}, problems, nil
}

// kubeconfigServer is the URL every kubeconfig points at.
func kubeconfigServer(inf *api.Infra) string {
	return "https://" + net.JoinHostPort(inf.Endpoint.Host, fmt.Sprint(inf.Endpoint.Port))
}

// sans is an ordered, duplicate-free set of subject alternative names.
type sans struct {
	dns []string
	ips []net.IP
}

func newSANs(hosts ...string) *sans {
	s := &sans{}
	s.add(hosts...)
	return s
}

// add adds each host as an IP SAN if it is an IP address, else as a DNS SAN.
func (s *sans) add(hosts ...string) {
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(s.ips, ip.Equal) {
				s.ips = append(s.ips, ip)
			}
			continue
		}
		h = strings.ToLower(h)
		if !slices.Contains(s.dns, h) {
			s.dns = append(s.dns, h)
		}
	}
}

func (s *sans) request(cn string, usage certs.Usage) certs.Request {
	return certs.Request{CommonName: cn, DNSNames: s.dns, IPs: s.ips, Usage: usage}
}
