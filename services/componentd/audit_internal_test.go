package componentd

import (
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestAuditQuery_DefaultsAndNamesEachBadValue(t *testing.T) {
	tests := []struct {
		query string
		bad   []string // the fields named
	}{
		{query: ""},
		{query: "limit=1000&since=2026-01-02T15:04:05Z&user=system:admin&verb=create&resource=pods/log"},
		{query: "since=2026-01-02T15:04:05.123456789%2B02:00&resource=deployments.apps"},
		{query: "limit=0", bad: []string{"limit"}},
		{query: "limit=1001", bad: []string{"limit"}},
		{query: "limit=ten", bad: []string{"limit"}},
		{query: "since=yesterday", bad: []string{"since"}},
		{query: "since=2026-01-02", bad: []string{"since"}},
		{query: "verb=CREATE", bad: []string{"verb"}},
		{query: "resource=pods/log/x", bad: []string{"resource"}},
		{query: "limit=-1&since=x&verb=get%20pods&resource=a%20b", bad: []string{"limit", "since", "verb", "resource"}},
	}
	for _, tt := range tests {
		v, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		q, err := auditQuery(v)
		var fields []string
		var ae *api.Error
		if errors.As(err, &ae) {
			if ae.Code != api.CodeInvalid {
				t.Errorf("%s: code %s", tt.query, ae.Code)
			}
			for _, f := range ae.Fields {
				fields = append(fields, f.Field)
			}
		} else if err != nil {
			t.Errorf("%s: %v is not an api.Error", tt.query, err)
		}
		if !slices.Equal(fields, tt.bad) {
			t.Errorf("%s: bad fields %v, want %v", tt.query, fields, tt.bad)
		}
		if tt.query == "" && (q.Limit != api.DefaultAuditLimit || !q.Since.IsZero()) {
			t.Errorf("defaults: %+v", q)
		}
	}
	q, _ := auditQuery(url.Values{"since": {"2026-01-02T15:04:05Z"}, "limit": {"7"}})
	if q.Limit != 7 || !q.Since.Equal(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)) {
		t.Errorf("parsed %+v", q)
	}
}
