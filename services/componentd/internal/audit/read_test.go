package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// event is one line as kube-apiserver writes it (--audit-log-format=json).
func event(id string, at time.Time, user, verb, resource, name string) string {
	e := map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": id,
		"stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/default/" + resource + "/" + name, "verb": verb,
		"user":      map[string]any{"username": user, "groups": []string{"system:authenticated"}},
		"sourceIPs": []string{"127.0.0.1"}, "userAgent": "test",
		"objectRef":                map[string]any{"resource": resource, "namespace": "default", "name": name, "apiVersion": "v1"},
		"responseStatus":           map[string]any{"metadata": map[string]any{}, "code": 200},
		"requestReceivedTimestamp": at.Format(time.RFC3339Nano), "stageTimestamp": at.Format(time.RFC3339Nano),
		"annotations": map[string]string{"authorization.k8s.io/decision": "allow"},
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// writeLog writes lines to dir/name, last modified at mod.
func writeLog(t *testing.T, dir, name string, mod time.Time, lines ...string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func ids(evs []api.AuditEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.AuditID
	}
	return out
}

// A cluster with two kube-apiserver replicas, the first with a rotated backup: events
// e00..e11 one second apart, spread over the three files.
func twoReplicas(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	writeLog(t, dir, "kube-apiserver-0-2026-01-02T15-04-10.000.log", at(4),
		event("e00", at(0), "admin", "create", "configmaps", "a"),
		event("e01", at(1), "system:kube-scheduler", "get", "pods", "p"),
		event("e03", at(3), "admin", "update", "configmaps", "a"))
	writeLog(t, dir, audit.LogFile(0), at(11),
		event("e05", at(5), "admin", "delete", "configmaps", "a"),
		event("e06", at(6), "system:kube-controller-manager", "list", "pods", ""),
		event("e09", at(9), "admin", "create", "secrets", "s"),
		event("e11", at(11), "admin", "get", "secrets", "s"),
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metad`) // being written
	writeLog(t, dir, audit.LogFile(1), at(10),
		event("e02", at(2), "admin", "get", "configmaps", "a"),
		event("e04", at(4), "system:kube-scheduler", "watch", "pods", ""),
		event("e07", at(7), "admin", "patch", "pods", "p"),
		event("e08", at(8), "admin", "create", "pods", "q"),
		event("e10", at(10), "admin", "create", "pods", "r"))
	// Not logs: ignored.
	writeLog(t, dir, "notes.txt", at(12), event("x", at(12), "admin", "create", "pods", "x"))
	return dir
}

func TestRead_ReturnsTheNewestMatchingEventsOfEveryReplicaAndBackupOldestFirst(t *testing.T) {
	dir := twoReplicas(t)
	tests := []struct {
		name string
		q    audit.Query
		want []string
	}{
		{"all", audit.Query{Limit: 100}, []string{"e00", "e01", "e02", "e03", "e04", "e05", "e06", "e07", "e08", "e09", "e10", "e11"}},
		{"newest three", audit.Query{Limit: 3}, []string{"e09", "e10", "e11"}},
		{"the newest nine reach the backup", audit.Query{Limit: 9}, []string{"e03", "e04", "e05", "e06", "e07", "e08", "e09", "e10", "e11"}},
		{"since", audit.Query{Limit: 100, Since: t0.Add(8 * time.Second)}, []string{"e08", "e09", "e10", "e11"}},
		{"by user", audit.Query{Limit: 100, User: "system:kube-scheduler"}, []string{"e01", "e04"}},
		{"by verb", audit.Query{Limit: 100, Verb: "create"}, []string{"e00", "e08", "e09", "e10"}},
		{"by resource", audit.Query{Limit: 100, Resource: "configmaps"}, []string{"e00", "e02", "e03", "e05"}},
		{"all filters and a limit", audit.Query{Limit: 2, User: "admin", Verb: "create", Resource: "pods"}, []string{"e08", "e10"}},
		{"nothing matches", audit.Query{Limit: 100, User: "nobody"}, []string{}},
		{"a limit below 1 is 1", audit.Query{}, []string{"e11"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := audit.Read(context.Background(), dir, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("Read = %v, want %v", ids(got), tt.want)
			}
		})
	}
}

func TestRead_DecodesTheEventAsKubeAPIServerWroteIt(t *testing.T) {
	dir := t.TempDir()
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"4d2c","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/namespaces/default/serviceaccounts?fieldManager=x","verb":"create",` +
		`"user":{"username":"admin","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.34.4",` +
		`"objectRef":{"resource":"serviceaccounts","namespace":"default","name":"robot","apiVersion":"v1"},` +
		`"responseStatus":{"metadata":{},"code":201},"requestObject":{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"robot"}},` +
		`"requestReceivedTimestamp":"2026-01-02T15:04:05.123456Z","stageTimestamp":"2026-01-02T15:04:05.134567Z",` +
		`"annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`
	writeLog(t, dir, audit.LogFile(0), t0, line)
	got, err := audit.Read(context.Background(), dir, audit.Query{Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Read = %v, %v", got, err)
	}
	e := got[0]
	if e.User.Username != "admin" || e.Verb != "create" || e.Level != "Request" || e.ObjectRef.Name != "robot" ||
		e.ResponseStatus.Code != 201 || e.StageTimestamp.Nanosecond() != 134567000 || !strings.Contains(string(e.RequestObject), `"name":"robot"`) {
		t.Errorf("decoded %+v", e)
	}
}

func TestRead_HandlesLongLinesAndNoDirectory(t *testing.T) {
	got, err := audit.Read(context.Background(), filepath.Join(t.TempDir(), "missing"), audit.Query{Limit: 10})
	if err != nil || len(got) != 0 {
		t.Fatalf("missing dir: %v, %v", got, err)
	}
	dir := t.TempDir()
	var lines []string
	for i := range 150 { // events of 0..149 KiB: lines span many read chunks
		e := event(fmt.Sprintf("e%03d", i), t0.Add(time.Duration(i)*time.Millisecond), "admin", "create", "pods", strings.Repeat("x", i<<10))
		lines = append(lines, e)
	}
	writeLog(t, dir, audit.LogFile(0), t0.Add(time.Second), lines...)
	got, err = audit.Read(context.Background(), dir, audit.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 || got[0].AuditID != "e000" || got[149].AuditID != "e149" || len(got[149].ObjectRef.Name) != 149<<10 {
		t.Errorf("read %d events, from %v", len(got), ids(got)[:min(3, len(got))])
	}
}
