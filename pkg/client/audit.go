package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

// AuditQuery selects the events of GET /v1/clusters/{cluster}/audit; zero fields are left to
// the server's defaults (the newest api.DefaultAuditLimit events, any user, verb, resource).
type AuditQuery struct {
	Limit                int
	Since                time.Time
	User, Verb, Resource string
}

// Values is the query string of q.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	for k, s := range map[string]string{"user": q.User, "verb": q.Verb, "resource": q.Resource} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Audit answers GET /v1/clusters/{cluster}/audit: the newest kube-apiserver audit events of
// the cluster that match q, oldest first.
func (c *Client) Audit(ctx context.Context, cluster string, q AuditQuery) (*api.AuditEventList, error) {
	path := ClusterPath(cluster, "audit")
	if v := q.Values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	return call[api.AuditEventList](ctx, c, http.MethodGet, path, nil)
}
