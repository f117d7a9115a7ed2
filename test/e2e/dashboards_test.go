package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/test/apicheck"
)

// dashboardDir holds the Grafana dashboards shipped in deploy/grafana.
const dashboardDir = "../../deploy/grafana"

// dashboard is the part of a Grafana dashboard JSON the tests read.
type dashboard struct {
	file       string
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []templateVar `json:"list"`
	} `json:"templating"`
}

type templateVar struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	AllValue string `json:"allValue,omitempty"` // what "All" stands for in a multi-value variable
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []target    `json:"targets"`
	Panels     []panel     `json:"panels"` // of a collapsed row
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *datasource `json:"datasource"`
	Instant    bool        `json:"instant"` // Grafana asks /api/v1/query, not query_range
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// loadDashboards parses every dashboard JSON of deploy/grafana.
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no dashboards in %s", dashboardDir)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboard{file: filepath.Base(f)}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: not a valid dashboard JSON: %v", d.file, err)
		}
		out = append(out, d)
	}
	return out
}

// allPanels lists the dashboard's panels, those inside collapsed rows included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// grafanaBuiltins are the variables Grafana defines itself.
var grafanaBuiltins = []string{"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
	"__from", "__to", "__dashboard", "__name", "__org", "__user", "__timeFilter"}

// variableRef matches $name, ${name} and ${name:format} in a query.
var variableRef = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[^}]*)?\}|([A-Za-z0-9_]+))`)

func variablesOf(s string) []string {
	var out []string
	for _, m := range variableRef.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

func TestDashboards_AreWellFormed(t *testing.T) {
	want := []string{"autoscaling.json", "cluster-detail.json", "fleet-overview.json", "ignition-pki.json", "nats-jetstream.json", "rollouts.json"}
	uids := map[string]string{}
	var files []string
	for _, d := range loadDashboards(t) {
		files = append(files, d.file)
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q title %q: both are required", d.file, d.UID, d.Title)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s: uid %q is also the uid of %s", d.file, d.UID, other)
		}
		uids[d.UID] = d.file
		defined := slices.Clone(grafanaBuiltins)
		for _, v := range d.Templating.List {
			defined = append(defined, v.Name)
		}
		ids := map[int]string{}
		queries := 0
		for _, p := range d.allPanels() {
			if other, dup := ids[p.ID]; dup || p.ID <= 0 {
				t.Errorf("%s: panel %q has id %d, also the id of %q (ids must be unique and positive)", d.file, p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q queries nothing", d.file, p.Title)
			}
			for _, ds := range []*datasource{p.Datasource} {
				if ds == nil || ds.Type != "prometheus" || (ds.UID != "${DS_PROMETHEUS}" && ds.UID != "prometheus") {
					t.Errorf("%s: panel %q data source %+v, want prometheus ${DS_PROMETHEUS}", d.file, p.Title, ds)
				}
			}
			for _, tg := range p.Targets {
				queries++
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: panel %q target %s has no expr", d.file, p.Title, tg.RefID)
				}
				if tg.Datasource != nil && tg.Datasource.UID != "${DS_PROMETHEUS}" && tg.Datasource.UID != "prometheus" {
					t.Errorf("%s: panel %q target %s data source %+v", d.file, p.Title, tg.RefID, tg.Datasource)
				}
				for _, v := range variablesOf(tg.Expr) {
					if !slices.Contains(defined, v) {
						t.Errorf("%s: panel %q uses $%s, which the dashboard does not define (templating: %v)", d.file, p.Title, v, defined)
					}
				}
				if _, err := promqlMetrics(tg.Expr); err != nil {
					t.Errorf("%s: panel %q: %v", d.file, p.Title, err)
				}
			}
		}
		if queries == 0 {
			t.Errorf("%s: no panel queries anything", d.file)
		}
	}
	if !slices.Equal(files, want) {
		t.Errorf("dashboards = %v, want %v", files, want)
	}
	// The cluster detail is one cluster's and one node pool's view.
	for _, d := range loadDashboards(t) {
		if d.file != "cluster-detail.json" {
			continue
		}
		for _, name := range []string{"cluster", "nodepool"} {
			if !slices.ContainsFunc(d.Templating.List, func(v templateVar) bool { return v.Name == name && v.Type == "query" }) {
				t.Errorf("cluster-detail.json has no query variable %q", name)
			}
		}
	}
}

// promqlMetrics returns the metric names a PromQL expression selects. It tokenizes the query
// rather than parsing it fully: string literals, label matchers, ranges, Grafana variables,
// grouping clauses and numbers are dropped; what remains as an identifier not followed by "(" and
// not a keyword is a metric name.
func promqlMetrics(expr string) ([]string, error) {
	s := variableRef.ReplaceAllString(expr, " ")
	s = stringLiteral.ReplaceAllString(s, `""`)
	var err error
	if s, err = dropBracketed(s, '{', '}'); err != nil {
		return nil, err
	}
	if s, err = dropBracketed(s, '[', ']'); err != nil {
		return nil, err
	}
	s = groupingClause.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promqlToken.FindAllStringSubmatchIndex(s, -1) {
		if m[2] < 0 { // a number or duration
			continue
		}
		id := s[m[2]:m[3]]
		rest := strings.TrimLeft(s[m[3]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promqlKeywords, strings.ToLower(id)) {
			continue
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("query %q selects no metric", expr)
	}
	return names, nil
}

var (
	stringLiteral  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	groupingClause = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// A number (1, 0.5, 1e3, 0x1f) or duration (5m, 1h30m) first, so its letters are not
	// taken for an identifier.
	promqlToken    = regexp.MustCompile(`\d[\w.]*(?:[eE][+-]?\d+)?|([A-Za-z_:][A-Za-z0-9_:]*)`)
	promqlKeywords = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
		"offset", "bool", "inf", "nan", "atan2"}
)

// dropBracketed removes every open…close span (they do not nest in PromQL once strings are gone).
func dropBracketed(s string, open, close byte) (string, error) {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case open:
			depth++
		case close:
			if depth == 0 {
				return "", fmt.Errorf("unbalanced %c in %q", close, s)
			}
			depth--
			b.WriteByte(' ')
		default:
			if depth == 0 {
				b.WriteByte(s[i])
			}
		}
	}
	if depth != 0 {
		return "", fmt.Errorf("unbalanced %c in %q", open, s)
	}
	return b.String(), nil
}

func TestPromQLMetrics_FindsOnlyMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`hostplane_clusters`, []string{"hostplane_clusters"}},
		{`sum by (daemon) (rate(hostplane_http_requests_total{code=~"5..",route!="by (x)"}[$__rate_interval]))`, []string{"hostplane_http_requests_total"}},
		{`histogram_quantile(0.99, sum by (controller, le) (rate(hostplane_reconcile_duration_seconds_bucket[5m])))`, []string{"hostplane_reconcile_duration_seconds_bucket"}},
		{`count(hostplane_component_available == 0) or vector(0)`, []string{"hostplane_component_available"}},
		{`a{state="updated"} / ignoring(state) group_left b{cluster=~"$cluster"}`, []string{"a", "b"}},
		{`sum(rate(x_total[1h] offset 1d)) by (cluster) > bool 1e3`, []string{"x_total"}},
		{`count(hostplane_pki_cert_expiry_seconds < 604800) or vector(0)`, []string{"hostplane_pki_cert_expiry_seconds"}},
		{`(p + q) / on(controller) r`, []string{"p", "q", "r"}},
		{`min_over_time(up[${__range}:1m])`, []string{"up"}},
	} {
		got, err := promqlMetrics(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("promqlMetrics(%q) = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`vector(1)`, `sum(x{a="b"`} {
		if got, err := promqlMetrics(bad); err == nil {
			t.Errorf("promqlMetrics(%q) = %v, want an error", bad, got)
		}
	}
}

// exportedSeries scrapes the front door's /metrics (every daemon's registry) and returns the
// names of its samples: a histogram's name_bucket, name_sum and name_count included.
func exportedSeries(t *testing.T, c *client) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, line := range samples(t, c) {
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// unlabelledValue scrapes the front door's /metrics and returns the value of the sample of
// name that has no labels (a gauge or counter of one series); it fails t when there is none.
func unlabelledValue(t *testing.T, c *client, name string) float64 {
	t.Helper()
	for _, line := range samples(t, c) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no sample %s", name)
	return 0
}

// samples scrapes the front door's /metrics (every daemon's registry) and returns its sample
// lines, comments left out.
func samples(t *testing.T, c *client) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// Through the OpenAPI check like every other API request of the e2e tests.
	resp, err := (&http.Client{Transport: apicheck.ForTest(t, nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] != '#' {
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// assertDashboardsQueryExportedMetrics checks that every metric a panel of the named
// dashboards queries is among the series the running stack exports, so no panel of
// deploy/grafana stays empty for want of a metric nobody exports (a typo, a renamed metric, a
// Vec never initialised). Call it once the stack has run what those dashboards show: a
// cluster with a ready node pool for most; an autoscaled pool that scaled for autoscaling.json.
func assertDashboardsQueryExportedMetrics(t *testing.T, c *client, files ...string) {
	t.Run("DashboardsQueryExportedMetrics", func(t *testing.T) {
		have := exportedSeries(t, c)
		checked := map[string]bool{}
		panels := 0
		for _, d := range loadDashboards(t) {
			if !slices.Contains(files, d.file) {
				continue
			}
			for _, p := range d.allPanels() {
				if p.Type == "row" {
					continue
				}
				panels++
				for _, tg := range p.Targets {
					names, err := promqlMetrics(tg.Expr)
					if err != nil {
						t.Errorf("%s: panel %q: %v", d.file, p.Title, err)
						continue
					}
					for _, n := range names {
						checked[n] = true
						if !have[n] {
							t.Errorf("%s: panel %q queries %s, which no daemon exports on /metrics", d.file, p.Title, n)
						}
					}
				}
			}
		}
		t.Logf("%d panels query %d distinct metrics; %d series names exported", panels, len(checked), len(have))
	})
}

// startPrometheus starts a real Prometheus (testenv.Prometheus) scraping the stack's front door
// /metrics every second with the admin token, with deploy/prometheus/alerts.yml loaded. Start
// it before what the dashboards show happens, so range queries see it happen.
func startPrometheus(t *testing.T, c *client) *testenv.PrometheusEnv {
	t.Helper()
	start := time.Now()
	p := testenv.Prometheus(t, testenv.PrometheusOptions{
		Target:      c.base + "/metrics",
		BearerToken: c.token,
		RuleFiles:   []string{alertsFile},
		Interval:    time.Second,
	})
	t.Logf("prometheus on %s (pid %d) scraping %s/metrics, %s after its start", p.URL, p.Pid(), c.base, time.Since(start).Round(100*time.Millisecond))
	return p
}

// The values Grafana would give its own variables in the live test: $__rate_interval is at
// least four scrape intervals (1 s here), and a range query steps every promStep.
const (
	promRateInterval = "30s"
	promStep         = 2 * time.Second
)

// expandVariables replaces the Grafana variables of expr: the dashboard's own from values (or
// their "All" value), Grafana's built-ins from the query's range. It returns the variables it
// could not give a value.
func expandVariables(expr string, d *dashboard, values map[string]string, rng time.Duration) (string, []string) {
	var missing []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		switch name {
		case "__rate_interval":
			return promRateInterval
		case "__interval":
			return promStep.String()
		case "__range":
			return fmt.Sprintf("%ds", int(rng.Seconds()))
		case "__range_s":
			return fmt.Sprintf("%d", int(rng.Seconds()))
		}
		if v, ok := values[name]; ok {
			return v
		}
		for _, v := range d.Templating.List {
			if v.Name == name && v.AllValue != "" {
				return v.AllValue
			}
		}
		missing = append(missing, name)
		return ref
	})
	return out, missing
}

// assertDashboardsInPrometheus evaluates every query of every panel of the named dashboards
// through prom's HTTP API the way Grafana does (an instant target with /api/v1/query, a range
// target with /api/v1/query_range over everything prom scraped), with the dashboards'
// variables set from values (cluster, nodepool) and Grafana's built-ins from the query. Each
// query must answer at least one series with a number (not NaN): no panel shows "No data".
func assertDashboardsInPrometheus(t *testing.T, prom *testenv.PrometheusEnv, values map[string]string, files ...string) {
	t.Run("DashboardsInPrometheus", func(t *testing.T) {
		c := ctx(t)
		end := time.Now()
		rng := end.Sub(prom.Started)
		queries, instant := 0, 0
		for _, d := range loadDashboards(t) {
			if !slices.Contains(files, d.file) {
				continue
			}
			for _, p := range d.allPanels() {
				for _, tg := range p.Targets {
					expr, missing := expandVariables(tg.Expr, &d, values, rng)
					if len(missing) > 0 {
						t.Errorf("%s: panel %q uses $%s, which the test gives no value (add it to the values of assertDashboardsInPrometheus)", d.file, p.Title, strings.Join(missing, ", $"))
						continue
					}
					var series []testenv.PromSeries
					var err error
					if tg.Instant {
						instant++
						series, err = prom.Query(c, expr)
					} else {
						series, err = prom.QueryRange(c, expr, prom.Started, end, promStep)
					}
					queries++
					what := "range"
					if tg.Instant {
						what = "instant"
					}
					switch {
					case err != nil:
						t.Errorf("%s: panel %q (%s query %s): %v", d.file, p.Title, what, expr, err)
					case len(series) == 0:
						t.Errorf("%s: panel %q: the %s query %s answers no series", d.file, p.Title, what, expr)
					case !slices.ContainsFunc(series, testenv.PromSeries.HasNumber):
						t.Errorf("%s: panel %q: the %s query %s answers only NaN (%d series)", d.file, p.Title, what, expr, len(series))
					}
				}
			}
		}
		t.Logf("%d queries of %d dashboards evaluated by Prometheus (%d instant, %d over the last %s)", queries, len(files), instant, queries-instant, rng.Round(time.Second))
	})
}

// assertAlertFires checks the alerting rules in prom over the running stack: every rule
// evaluates without error and none fires in the healthy stack. Then a burst of Ignition
// requests with a wrong token for cluster makes HostplaneIgnitionUnauthorizedBurst fire, as
// GET /api/v1/alerts shows.
func assertAlertFires(t *testing.T, c *client, prom *testenv.PrometheusEnv, cluster string) {
	t.Run("AlertFires", func(t *testing.T) {
		ctx := ctx(t)
		var rules []testenv.PromRule
		testenv.Eventually(t, 30*time.Second, func() bool {
			var err error
			rules, err = prom.Rules(ctx)
			if err != nil || len(rules) == 0 {
				return false
			}
			for _, r := range rules {
				if r.Health != "ok" {
					return false
				}
			}
			return true
		}, "not every rule of %s evaluates: %+v", alertsFile, rules)
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if a.State == "firing" {
				t.Errorf("alert %s fires in a healthy stack: %v %v", a.Labels["alertname"], a.Labels, a.Annotations["description"])
			}
		}

		const burst = 15 // the rule fires above 10 in 5 minutes
		for range burst {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/ignition/"+cluster, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer not-a-token-of-this-cluster")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("GET /ignition/%s with a wrong token: %s, want 401", cluster, resp.Status)
			}
		}
		start := time.Now()
		var fired *testenv.PromAlert
		testenv.Eventually(t, time.Minute, func() bool {
			alerts, err := prom.Alerts(ctx)
			for i, a := range alerts {
				if err == nil && a.Labels["alertname"] == "HostplaneIgnitionUnauthorizedBurst" && a.State == "firing" {
					fired = &alerts[i]
				}
			}
			return fired != nil
		}, "HostplaneIgnitionUnauthorizedBurst never fired after %d refused Ignition requests", burst)
		t.Logf("HostplaneIgnitionUnauthorizedBurst fired %s after the burst: %s", time.Since(start).Round(100*time.Millisecond), fired.Annotations["summary"])
	})
}
