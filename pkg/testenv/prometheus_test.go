package testenv

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPrometheus_ScrapesWithTheTokenEvaluatesRulesAndStops(t *testing.T) {
	const token = "s3cret-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "# TYPE demo_things gauge")
		fmt.Fprintln(w, `demo_things{kind="a"} 3`)
	}))
	defer srv.Close()
	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: demo
    rules:
      - alert: DemoThings
        expr: demo_things > 2
        labels: {severity: warning}
`), 0o600); err != nil {
		t.Fatal(err)
	}

	p := Prometheus(t, PrometheusOptions{Target: srv.URL + "/metrics", BearerToken: token, RuleFiles: []string{rules}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []PromSeries
	Eventually(t, 30*time.Second, func() bool {
		var err error
		got, err = p.Query(ctx, `demo_things{job="hostplane"}`)
		return err == nil && len(got) == 1
	}, "demo_things never scraped: %v", got)
	if got[0].Metric["kind"] != "a" || got[0].Values[0] != 3 {
		t.Errorf("demo_things = %+v, want kind=a value 3", got[0])
	}
	if s, err := p.Query(ctx, `scalar(demo_things) * 2`); err != nil || len(s) != 1 || s[0].Values[0] != 6 {
		t.Errorf("scalar query = %+v, %v; want one series of 6", s, err)
	}
	Eventually(t, 30*time.Second, func() bool { // once a step of the range is past the first scrape
		s, err := p.QueryRange(ctx, `demo_things`, p.Started, time.Now(), time.Second)
		return err == nil && len(s) == 1 && s[0].HasNumber()
	}, "the range query never had demo_things")
	if _, err := p.Query(ctx, `sum(`); err == nil {
		t.Error("a query that does not parse returned no error")
	}
	Eventually(t, 30*time.Second, func() bool {
		alerts, err := p.Alerts(ctx)
		return err == nil && len(alerts) == 1 && alerts[0].Labels["alertname"] == "DemoThings" && alerts[0].State == "firing"
	}, "DemoThings never fired")
	rs, err := p.Rules(ctx)
	if err != nil || len(rs) != 1 || rs[0].Health != "ok" || rs[0].Group != "demo" {
		t.Errorf("rules = %+v, %v", rs, err)
	}

	pid := p.Pid()
	p.Stop()
	if Alive(pid) {
		t.Errorf("prometheus (pid %d) still runs after Stop", pid)
	}
	p.Stop() // a second Stop (the cleanup's) is a no-op
}
