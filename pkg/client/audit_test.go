package client_test

import (
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/client"
)

func TestAuditQuery_EncodesOnlyWhatIsSet(t *testing.T) {
	if got := (client.AuditQuery{}).Values().Encode(); got != "" {
		t.Errorf("zero query = %q, want none", got)
	}
	q := client.AuditQuery{Limit: 20, Since: time.Date(2026, 1, 2, 16, 4, 5, 0, time.FixedZone("CET", 3600)),
		User: "system:admin", Verb: "create", Resource: "pods/log"}
	want := "limit=20&resource=pods%2Flog&since=2026-01-02T15%3A04%3A05Z&user=system%3Aadmin&verb=create"
	if got := q.Values().Encode(); got != want {
		t.Errorf("query = %q\nwant    %q", got, want)
	}
}
