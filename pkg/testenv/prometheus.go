package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PrometheusTool returns the path of a Prometheus binary on PATH (name "prometheus" or
// "promtool"), failing the test, under CI=true or not, with how to install it when it is
// missing: tests of alerting rules and dashboards have no fallback.
func PrometheusTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("testenv: %s is not on PATH: run tools/prometheus.sh (make prometheus-tools; it installs Debian's prometheus package, which has prometheus and promtool)", name)
	}
	return p
}

// PrometheusOptions configure the Prometheus a test starts.
type PrometheusOptions struct {
	// Target is the URL of the /metrics endpoint to scrape, for example
	// http://127.0.0.1:8080/metrics.
	Target string
	// Job is the scrape job's name (label job); default "hostplane".
	Job string
	// BearerToken, when set, is sent with every scrape (written to a 0600 file that the
	// scrape config's authorization.credentials_file names).
	BearerToken string
	// RuleFiles are loaded as rule_files; they are evaluated every Interval.
	RuleFiles []string
	// Interval is the scrape and rule evaluation interval; default 1s.
	Interval time.Duration
}

// PrometheusEnv is a running Prometheus.
type PrometheusEnv struct {
	// URL is its HTTP API's base URL, http://127.0.0.1:<port>.
	URL string
	// Started is when it started; a range query from it covers everything it scraped.
	Started time.Time

	cmd  *exec.Cmd
	done chan struct{}
}

// Prometheus starts a real Prometheus (the prometheus binary on PATH) on a free loopback port
// with its data under t.TempDir(), scraping o.Target and evaluating o.RuleFiles, and waits until
// it has scraped the target once. It stops at cleanup, or earlier with Stop; nothing is left running.
func Prometheus(t testing.TB, o PrometheusOptions) *PrometheusEnv {
	t.Helper()
	bin := PrometheusTool(t, "prometheus")
	if o.Job == "" {
		o.Job = "hostplane"
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	target, err := url.Parse(o.Target)
	if err != nil || target.Host == "" {
		t.Fatalf("testenv: Prometheus target %q is not a URL", o.Target)
	}
	dir := t.TempDir()
	scrape := map[string]any{
		"job_name":       o.Job,
		"scheme":         target.Scheme,
		"metrics_path":   target.Path,
		"static_configs": []any{map[string]any{"targets": []string{target.Host}}},
	}
	if o.BearerToken != "" {
		tokenFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(o.BearerToken), 0o600); err != nil {
			t.Fatal(err)
		}
		scrape["authorization"] = map[string]any{"type": "Bearer", "credentials_file": tokenFile}
	}
	var rules []string
	for _, f := range o.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, abs)
	}
	interval := o.Interval.String()
	cfg := map[string]any{
		"global":         map[string]any{"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
		"rule_files":     rules,
		"scrape_configs": []any{scrape},
	}
	// JSON is YAML: Prometheus reads this file as its configuration.
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	p := &PrometheusEnv{URL: "http://" + addr, done: make(chan struct{})}
	p.cmd = exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	p.cmd.Stdout = testWriter(t)
	p.cmd.Stderr = p.cmd.Stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testenv: start prometheus: %v", err)
	}
	p.Started = time.Now()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Stop)
	Eventually(t, 30*time.Second, func() bool {
		select {
		case <-p.done:
			t.Fatalf("testenv: prometheus exited before it was ready (its log is above)")
		default:
		}
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "prometheus at %s never became ready", p.URL)
	// Prometheus scrapes a new target a few seconds after it is ready; what happens before
	// that first scrape is lost to rates and histograms, so wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var up []PromSeries
	Eventually(t, 30*time.Second, func() bool {
		up, _ = p.Query(ctx, fmt.Sprintf("up{job=%q}", o.Job))
		return len(up) == 1 && up[0].Values[0] == 1
	}, "prometheus never scraped %s (up: %+v; is the token right, and does the target answer?)", o.Target, up)
	return p
}

// Stop stops Prometheus (SIGTERM, then SIGKILL after 10 s) and waits for it to exit.
func (p *PrometheusEnv) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Pid is the Prometheus process's id.
func (p *PrometheusEnv) Pid() int { return p.cmd.Process.Pid }

// PromSeries is one series of a query's answer: its labels and its values (one for an
// instant query, one per step for a range query).
type PromSeries struct {
	Metric map[string]string
	Values []float64
}

// HasNumber reports whether a value of s is a number (not NaN): a panel shows something.
func (s PromSeries) HasNumber() bool {
	return slices.ContainsFunc(s.Values, func(v float64) bool { return !math.IsNaN(v) })
}

// Query evaluates expr now through the HTTP API (GET /api/v1/query).
func (p *PrometheusEnv) Query(ctx context.Context, expr string) ([]PromSeries, error) {
	return p.query(ctx, "/api/v1/query", url.Values{"query": {expr}})
}

// QueryRange evaluates expr from start to end every step (GET /api/v1/query_range), as a
// Grafana time series panel does.
func (p *PrometheusEnv) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]PromSeries, error) {
	return p.query(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {unixString(start)}, "end": {unixString(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)
}

func (p *PrometheusEnv) query(ctx context.Context, path string, params url.Values) ([]PromSeries, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, path+"?"+params.Encode(), &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "scalar": // [time, "value"]: one series without labels
		var v []any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, err
		}
		return []PromSeries{{Metric: map[string]string{}, Values: []float64{sampleValue(v)}}}, nil
	case "vector", "matrix":
	default:
		return nil, fmt.Errorf("%s: result type %q", path, data.ResultType)
	}
	var result []struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
		Values [][]any           `json:"values"`
	}
	if err := json.Unmarshal(data.Result, &result); err != nil {
		return nil, err
	}
	var out []PromSeries
	for _, r := range result {
		s := PromSeries{Metric: r.Metric}
		if r.Value != nil {
			s.Values = append(s.Values, sampleValue(r.Value))
		}
		for _, v := range r.Values {
			s.Values = append(s.Values, sampleValue(v))
		}
		out = append(out, s)
	}
	return out, nil
}

// sampleValue reads the value of a [time, "value"] pair; NaN if it is not one.
func sampleValue(pair []any) float64 {
	if len(pair) != 2 {
		return math.NaN()
	}
	s, _ := pair[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// PromAlert is one alert of GET /api/v1/alerts.
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
	Value       string            `json:"value"`
}

// Alerts lists the pending and firing alerts (GET /api/v1/alerts).
func (p *PrometheusEnv) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", &data)
	return data.Alerts, err
}

// PromRule is one rule of GET /api/v1/rules: its health says whether its last evaluation
// worked.
type PromRule struct {
	Name      string `json:"name"`
	Type      string `json:"type"` // alerting or recording
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Group     string `json:"-"`
}

// Rules lists every loaded rule.
func (p *PrometheusEnv) Rules(ctx context.Context) ([]PromRule, error) {
	var data struct {
		Groups []struct {
			Name  string     `json:"name"`
			Rules []PromRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get(ctx, "/api/v1/rules", &data); err != nil {
		return nil, err
	}
	var out []PromRule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// get calls the HTTP API and decodes the envelope's data into out.
func (p *PrometheusEnv) get(ctx context.Context, pathAndQuery string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+pathAndQuery, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("GET %s: %s: %w", pathAndQuery, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s: %s", pathAndQuery, resp.Status, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// freeLoopbackAddr returns 127.0.0.1:<a port free a moment ago>.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
