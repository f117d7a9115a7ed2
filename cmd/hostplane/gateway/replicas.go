package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/httpapi"
)

// leaderTTL is how long the gateway trusts its last finding of which replica of a daemon
// leads before it asks their /leaderz again.
const leaderTTL = time.Second

// replicas are the admin ports of one daemon's replicas. Every healthy replica is ready
// (/readyz), but only the one that holds the daemon's lease (pkg/leader) serves /v1; the
// others stand by and answer 503, and only the leader's /leaderz answers 200. The replicas
// are found two ways:
//   - a comma-separated list of base URLs (docker compose, whose replicas share one network
//     namespace on different ports: "http://127.0.0.1:8081,http://127.0.0.1:8181");
//   - one URL whose host name resolves to several addresses (Kubernetes: a headless Service
//     names every ready pod): each address is a replica, reached on the URL's port and, over
//     https, verified against the URL's host name (the Service's name in the daemon's
//     certificate), not the address.
type replicas struct {
	urls   []*url.URL
	lookup func(ctx context.Context, host string) ([]string, error)
	// transport carries the calls (proxied and probes); over https with a resolved name its
	// TLS verifies the name, whatever address is dialled.
	transport http.RoundTripper
	client    *http.Client

	mu      sync.Mutex
	leader  *url.URL
	several bool // the last look found more than one replica
	checked time.Time
}

// parseReplicas parses a comma-separated list of base URLs; nil and the bad entry when one
// is not http(s)://host:port.
func parseReplicas(raw string) (*replicas, string) {
	rs := &replicas{}
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		u, err := url.Parse(part)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, part
		}
		rs.urls = append(rs.urls, u)
	}
	return rs, ""
}

// setTransport makes the replicas' transport from the gateway's: when the one URL is an
// https URL with a host name and base is an *http.Transport, a clone whose TLS verifies that
// name (the addresses it resolves to are dialled); base otherwise.
func (rs *replicas) setTransport(base http.RoundTripper) {
	rs.transport = base
	if u := rs.resolvable(); u != nil && u.Scheme == "https" {
		if t, ok := base.(*http.Transport); ok {
			t = t.Clone()
			if t.TLSClientConfig == nil {
				t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			t.TLSClientConfig.ServerName = u.Hostname()
			rs.transport = t
		}
	}
	rs.client = &http.Client{Transport: rs.transport}
}

// resolvable returns the one URL when the replicas are given as a single URL with a host
// name (not an address); nil otherwise.
func (rs *replicas) resolvable() *url.URL {
	if len(rs.urls) != 1 || net.ParseIP(rs.urls[0].Hostname()) != nil {
		return nil
	}
	return rs.urls[0]
}

// candidates returns the replicas' base URLs now: the list as given, or the one URL once
// per address its host name resolves to (the URL itself when it resolves to one address or
// the lookup fails: the dial then resolves it).
func (rs *replicas) candidates(ctx context.Context) []*url.URL {
	u := rs.resolvable()
	if u == nil || rs.lookup == nil {
		return rs.urls
	}
	addrs, err := rs.lookup(ctx, u.Hostname())
	if err != nil || len(addrs) < 2 {
		return rs.urls
	}
	slices.Sort(addrs)
	out := make([]*url.URL, 0, len(addrs))
	for _, a := range slices.Compact(addrs) {
		c := *u
		c.Host = net.JoinHostPort(a, u.Port())
		out = append(out, &c)
	}
	return out
}

// pick returns the base URL of the replica that leads: the last one found within leaderTTL,
// else the first whose /leaderz answers 200 now (the first URL as given when none does: it
// answers 503 and the caller retries).
func (rs *replicas) pick(ctx context.Context, g *gateway) *url.URL {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.leader != nil && time.Since(rs.checked) < leaderTTL {
		return rs.leader
	}
	cands := rs.candidates(ctx)
	rs.several = len(cands) > 1
	if len(cands) == 1 {
		rs.leader, rs.checked = cands[0], time.Now()
		return cands[0]
	}
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, u := range cands {
		wg.Go(func() { errs[i] = g.probe(ctx, rs.client, u.JoinPath(httpapi.PathLeaderz)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			rs.leader, rs.checked = cands[i], time.Now()
			return cands[i]
		}
	}
	rs.leader = nil
	return rs.urls[0]
}

// forget drops the finding: the replica it named answered as a standby or not at all.
func (rs *replicas) forget() {
	rs.mu.Lock()
	rs.leader = nil
	rs.mu.Unlock()
}

// manyReplicas reports whether the last look found more than one replica.
func (rs *replicas) manyReplicas() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.several
}
