package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestAuditTable_ShowsWhoDidWhatToWhichObject(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.FixedZone("CET", 3600))
	evs := []api.AuditEvent{
		{AuditID: "a1", Level: "Request", Verb: "create", User: api.AuditUser{Username: "system:admin"}, SourceIPs: []string{"10.0.0.7"},
			ObjectRef:      &api.AuditObjectRef{Resource: "configmaps", Namespace: "default", Name: "settings"},
			ResponseStatus: &api.AuditStatus{Code: 201}, StageTimestamp: at},
		{AuditID: "a2", Level: "Metadata", Verb: "patch", User: api.AuditUser{Username: "system:admin"}, ImpersonatedUser: &api.AuditUser{Username: "alice"},
			ObjectRef:      &api.AuditObjectRef{Resource: "deployments", APIGroup: "apps", Subresource: "scale", Namespace: "web", Name: "front"},
			ResponseStatus: &api.AuditStatus{Code: 403}, StageTimestamp: at},
		{AuditID: "a3", Level: "Metadata", Verb: "get", User: api.AuditUser{Username: "system:anonymous"},
			RequestURI: "/version?timeout=32s", ResponseStatus: &api.AuditStatus{Code: 200}, StageTimestamp: at},
		{AuditID: "a4", Level: "Metadata", Verb: "delete", User: api.AuditUser{Username: "system:admin"},
			ObjectRef: &api.AuditObjectRef{Resource: "namespaces", Name: "old"}, StageTimestamp: at},
	}
	var b bytes.Buffer
	if err := auditTable(&b, false, evs); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"TIME", "USER", "VERB", "RESOURCE", "NAMESPACE/NAME", "CODE"},
		{"2026-01-02T14:04:05Z", "system:admin", "create", "configmaps", "default/settings", "201"},
		{"2026-01-02T14:04:05Z", "system:admin", "as", "alice", "patch", "deployments.apps/scale", "web/front", "403"},
		{"2026-01-02T14:04:05Z", "system:anonymous", "get", "/version", "<none>", "200"},
		{"2026-01-02T14:04:05Z", "system:admin", "delete", "namespaces", "old", "<none>"},
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
	b.Reset()
	if err := auditTable(&b, true, evs[:1]); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(strings.Split(b.String(), "\n")[1]); strings.Join(got[6:], " ") != "Request 10.0.0.7 a1" {
		t.Errorf("wide row = %q", got)
	}
}
