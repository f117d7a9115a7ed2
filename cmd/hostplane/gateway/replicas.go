package gateway

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/httpapi"
)

// leaderTTL is how long the gateway trusts its last finding of which replica of a daemon
// leads before it asks their /readyz again.
const leaderTTL = time.Second

// replicas are the admin ports of one daemon's replicas. Only the replica that holds the
// daemon's lease (pkg/leader) is ready and serves /v1; the others stand by and answer 503. A
// Kubernetes Service does this choice with readiness probes; docker compose, whose replicas
// share one network namespace on different ports, lists them all in the backend URL
// ("http://127.0.0.1:8081,http://127.0.0.1:8181") and the gateway picks the ready one.
type replicas struct {
	urls []*url.URL

	mu      sync.Mutex
	leader  int
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

// pick returns the base URL of the replica that leads: the last one found ready within
// leaderTTL, else the first that answers /readyz now (the first when none does; it answers
// 503 and the caller retries).
func (rs *replicas) pick(ctx context.Context, g *gateway) *url.URL {
	if len(rs.urls) == 1 {
		return rs.urls[0]
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if time.Since(rs.checked) < leaderTTL {
		return rs.urls[rs.leader]
	}
	errs := make([]error, len(rs.urls))
	var wg sync.WaitGroup
	for i, u := range rs.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.probe(ctx, u.JoinPath(httpapi.PathReadyz))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			rs.leader, rs.checked = i, time.Now()
			return rs.urls[i]
		}
	}
	return rs.urls[rs.leader]
}

// forget drops the finding: the replica it named answered as a standby or not at all.
func (rs *replicas) forget() {
	rs.mu.Lock()
	rs.checked = time.Time{}
	rs.mu.Unlock()
}
