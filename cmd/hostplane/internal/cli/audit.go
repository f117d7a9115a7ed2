package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

// routeAudit is the route of a cluster's kube-apiserver audit log.
const routeAudit = "/v1/clusters/{c}/audit"

func newGetAuditCommand(o *Options) *cobra.Command {
	var (
		q     client.AuditQuery
		since time.Duration
	)
	cmd := &cobra.Command{
		Use:     "audit CLUSTER",
		Aliases: []string{"auditlog", "audit-log"},
		Short:   "Show the newest events of a cluster's kube-apiserver audit log",
		Long: `Show the newest kube-apiserver audit events of a cluster, oldest first, from every
replica's audit log (GET ` + routeAudit + `; needs an admin token). What is logged
follows the cluster's spec.configuration.apiServer.audit.profile: Default (metadata of every
request), WriteRequestBodies, AllRequestBodies or None.

Columns: TIME USER VERB RESOURCE NAMESPACE/NAME CODE; -o wide adds LEVEL, SOURCE and
AUDIT-ID; -o json or yaml print the events with their request bodies.`,
		Example: `  hostplane get audit demo
  hostplane get audit demo --user system:admin --verb create --limit 20
  hostplane get audit demo --resource configmaps --since 1h -o json`,
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	}
	f := cmd.Flags()
	f.IntVar(&q.Limit, "limit", api.DefaultAuditLimit, fmt.Sprintf("how many of the newest events (at most %d)", api.MaxAuditLimit))
	f.StringVar(&q.User, "user", "", "only the requests of this user, e.g. system:admin")
	f.StringVar(&q.Verb, "verb", "", "only this verb: get, list, watch, create, update, patch, delete, ...")
	f.StringVar(&q.Resource, "resource", "", "only this resource, e.g. configmaps or pods/log")
	f.DurationVar(&since, "since", 0, "only the events of this last duration, e.g. 30m")
	return getter[[]api.AuditEvent]{
		check: func(cmd *cobra.Command) error {
			if q.Limit < 1 || q.Limit > api.MaxAuditLimit {
				return usagef(cmd, "--limit %d: want 1 to %d", q.Limit, api.MaxAuditLimit)
			}
			if since < 0 {
				return usagef(cmd, "--since %s: want a positive duration such as 30m", since)
			}
			return nil
		},
		fetch: func(cx context.Context, c *client.Client, args []string) (any, []api.AuditEvent, error) {
			if since > 0 {
				q.Since = time.Now().Add(-since)
			}
			l, err := c.Audit(cx, args[0], q)
			if err != nil {
				return nil, nil, notServed(err, routeAudit)
			}
			return l, l.Items, nil
		},
		table: func(s Streams, wide bool, evs []api.AuditEvent) error {
			if len(evs) == 0 {
				fmt.Fprintln(s.ErrOut, "No audit events found.")
				return nil
			}
			return auditTable(s.Out, wide, evs)
		},
	}.command(o, cmd)
}

// auditTable prints events as TIME USER VERB RESOURCE NAMESPACE/NAME CODE; wide adds LEVEL,
// SOURCE (the first source IP) and AUDIT-ID.
func auditTable(w io.Writer, wide bool, evs []api.AuditEvent) error {
	t := newTable(w, columns(wide, []string{"TIME", "USER", "VERB", "RESOURCE", "NAMESPACE/NAME", "CODE"},
		"LEVEL", "SOURCE", "AUDIT-ID")...)
	for _, e := range evs {
		user := e.User.Username
		if e.ImpersonatedUser != nil {
			user += " as " + e.ImpersonatedUser.Username
		}
		resource, object := auditObject(&e)
		code := ""
		if e.ResponseStatus != nil && e.ResponseStatus.Code != 0 {
			code = strconv.Itoa(e.ResponseStatus.Code)
		}
		row := []string{e.StageTimestamp.UTC().Format(time.RFC3339), user, e.Verb, resource, object, code}
		if wide {
			source := ""
			if len(e.SourceIPs) > 0 {
				source = e.SourceIPs[0]
			}
			row = append(row, e.Level, source, e.AuditID)
		}
		t.row(row...)
	}
	return t.flush()
}

// auditObject is what an event's RESOURCE and NAMESPACE/NAME columns show: resource (with its
// API group and subresource) and namespace/name, or the path of a non-resource request.
func auditObject(e *api.AuditEvent) (resource, object string) {
	r := e.ObjectRef
	if r == nil {
		path, _, _ := strings.Cut(e.RequestURI, "?")
		return path, ""
	}
	resource = r.Resource
	if r.APIGroup != "" {
		resource += "." + r.APIGroup
	}
	if r.Subresource != "" {
		resource += "/" + r.Subresource
	}
	object = r.Name
	if r.Namespace != "" {
		object = r.Namespace + "/" + r.Name
	}
	return resource, object
}
