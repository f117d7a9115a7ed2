package componentd

import (
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// auditEvents answers GET /v1/clusters/{cluster}/audit?limit=N&since=T&user=U&verb=V&resource=R
// with the newest kube-apiserver audit events of the cluster that match, oldest first, from
// every replica's audit log and its rotated backups.
func (d *Daemon) auditEvents(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	q, err := auditQuery(r.URL.Query())
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, _, err := d.clusters.Get(ctx, cluster); errors.Is(err, store.ErrNotFound) {
		return api.Errorf(api.CodeNotFound, "cluster %q not found", cluster)
	} else if err != nil {
		return err
	}
	if d.cfg.Runtime == RuntimeKubernetes {
		return api.Errorf(api.CodeNotFound, "the kubernetes runtime keeps the audit log in the kube-apiserver pods' %q volume, not here: "+
			"read it in namespace %s of the management cluster (kubectl exec, or a log shipper mounting the volume)",
			kuberuntime.AuditVolume, kuberuntime.Namespace(cluster))
	}
	evs, err := audit.Read(ctx, filepath.Join(d.ClusterDir(cluster), component.AuditDir), q)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []api.AuditEvent{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.AuditEventList{Items: evs})
	return nil
}

// auditQuery reads the query of GET .../audit; bad values are an Invalid error naming each.
func auditQuery(v url.Values) (audit.Query, error) {
	q := audit.Query{Limit: api.DefaultAuditLimit, User: v.Get("user"), Verb: v.Get("verb"), Resource: v.Get("resource")}
	var fe api.FieldErrors
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxAuditLimit {
			fe.Add("limit", "%q must be a whole number from 1 to %d", s, api.MaxAuditLimit)
		}
		q.Limit = n
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			fe.Add("since", "%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
		}
		q.Since = t
	}
	if !validToken(q.Verb, false) {
		fe.Add("verb", "%q is not a verb such as create, get or list", q.Verb)
	}
	if !validToken(q.Resource, true) {
		fe.Add("resource", "%q is not a resource such as configmaps, or a subresource such as pods/log", q.Resource)
	}
	if err := fe.Err(); err != nil {
		if ae, ok := errors.AsType[*api.Error](err); ok {
			ae.Message = "invalid query"
		}
		return q, err
	}
	return q, nil
}

// validToken reports whether s can be a verb, or (resource) a resource or
// resource/subresource, of an audit event: lower-case letters, digits, '.' and '-'.
func validToken(s string, resource bool) bool {
	slashes := 0
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', resource && (c >= '0' && c <= '9' || c == '.' || c == '-'):
		case resource && c == '/' && slashes == 0:
			slashes++
		default:
			return false
		}
	}
	return len(s) <= 253
}
