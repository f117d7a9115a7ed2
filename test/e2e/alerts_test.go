package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// The alerting rules of deploy/prometheus, their promtool unit tests and their runbook.
const (
	alertsDir      = "../../deploy/prometheus"
	alertsFile     = alertsDir + "/alerts.yml"
	alertTestsFile = alertsDir + "/alerts_test.yml"
	operationsDoc  = "../../docs/operations.md"
	runbookURL     = "https://github.com/hostplane/hostplane/blob/main/docs/operations.md#"
)

// ruleGroups is a Prometheus rule file, and the spec of a PrometheusRule.
type ruleGroups struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func loadRuleGroups(t *testing.T, file string) ruleGroups {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(b, &g); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return g
}

func (g ruleGroups) alerts() []rule {
	var out []rule
	for _, gr := range g.Groups {
		for _, r := range gr.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestAlerts_PrometheusRuleIsTheRulesFile checks that deploy/k8s's PrometheusRule, as kustomize
// renders it in every variant, holds exactly the groups and rules of deploy/prometheus/alerts.yml.
func TestAlerts_PrometheusRuleIsTheRulesFile(t *testing.T) {
	want := loadRuleGroups(t, alertsFile)
	for _, variant := range manifestVariants {
		idx := indexObjects(renderManifests(t, variant))
		pr := idx.get(t, "PrometheusRule", "hostplane")
		if pr.GetNamespace() != manifestNamespace {
			t.Errorf("%s: PrometheusRule in namespace %q, want %s", variant, pr.GetNamespace(), manifestNamespace)
		}
		b, err := json.Marshal(pr.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		var got ruleGroups
		if err := yaml.UnmarshalStrict(b, &got); err != nil {
			t.Fatalf("%s: PrometheusRule spec: %v", variant, err)
		}
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.MarshalIndent(got, "", "  ")
			wj, _ := json.MarshalIndent(want, "", "  ")
			t.Errorf("%s: the PrometheusRule (deploy/k8s/base/prometheusrule.yaml) differs from %s: change both.\nPrometheusRule spec:\n%s\nalerts.yml:\n%s",
				variant, alertsFile, gj, wj)
		}
	}
}

// The alerts operators are paged for (issue 15); each must stay.
var wantAlerts = []string{
	"HostplaneClusterNotAvailable", "HostplaneNodePoolNotReady", "HostplaneMachinesStuckProvisioning",
	"HostplaneCertificateRenewalOverdue", "HostplaneCertificateExpiringSoon", "HostplaneIgnitionUnauthorizedBurst",
	"HostplaneNATSConsumerLag", "HostplaneOutboxNotDraining", "HostplaneDaemonDown",
}

// TestAlerts_AreDocumentedAndQueryExportedMetrics checks every alert's labels and annotations,
// that its runbook_url points at a section of docs/operations.md, and that it queries only
// hostplane's metrics (or up).
func TestAlerts_AreDocumentedAndQueryExportedMetrics(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} +(.+?) *$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	var names []string
	for _, r := range loadRuleGroups(t, alertsFile).alerts() {
		names = append(names, r.Alert)
		if !strings.HasPrefix(r.Alert, "Hostplane") {
			t.Errorf("alert %s: names start with Hostplane", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		if want := runbookURL + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("alert %s: %s has no section %q (its runbook)", r.Alert, operationsDoc, r.Alert)
		}
		metrics, err := promqlMetrics(r.Expr)
		if err != nil {
			t.Errorf("alert %s: %v", r.Alert, err)
		}
		for _, m := range metrics {
			if m != "up" && !strings.HasPrefix(m, "hostplane_") {
				t.Errorf("alert %s queries %s, not a hostplane metric", r.Alert, m)
			}
		}
	}
	for _, w := range wantAlerts {
		if !slices.Contains(names, w) {
			t.Errorf("no alert %s in %s", w, alertsFile)
		}
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAlerts_Promtool runs promtool check rules and promtool test rules on deploy/prometheus,
// and checks that the unit tests make every alert fire at least once and stay silent at least
// once.
func TestAlerts_Promtool(t *testing.T) {
	promtool := testenv.PrometheusTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", filepath.Base(alertsFile)}, {"test", "rules", filepath.Base(alertTestsFile)}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = alertsDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s (in deploy/prometheus): %v\n%s", strings.Join(args, " "), err, out)
		} else {
			t.Logf("promtool %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		}
	}

	b, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			Name           string `json:"name"`
			AlertRuleTests []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("%s: %v", alertTestsFile, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range loadRuleGroups(t, alertsFile).alerts() {
		if !fires[r.Alert] {
			t.Errorf("%s: no test makes %s fire", alertTestsFile, r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no test shows %s silent", alertTestsFile, r.Alert)
		}
	}
}

// TestAlerts_ComposeLoadsThem checks that deploy/compose's Prometheus (profile observability)
// loads alerts.yml: the compose file mounts it where prometheus.yml's rule_files says, and
// promtool check config accepts that configuration with the rules in place.
func TestAlerts_ComposeLoadsThem(t *testing.T) {
	promtool := testenv.PrometheusTool(t, "promtool")
	const inContainer = "/etc/prometheus/alerts.yml"
	b, err := os.ReadFile(composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Volumes []string `json:"volumes"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(compose.Services["prometheus"].Volumes, "../prometheus/alerts.yml:"+inContainer+":ro") {
		t.Errorf("the compose service prometheus does not mount ../prometheus/alerts.yml at %s: volumes %v", inContainer, compose.Services["prometheus"].Volumes)
	}
	cfg, err := os.ReadFile(filepath.Join(filepath.Dir(composeFile(t)), "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "- "+inContainer) {
		t.Fatalf("deploy/compose/prometheus.yml has no rule_files entry %s", inContainer)
	}
	abs, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	// The management CA the daemons' admin ports are verified with, made as nats-creds does.
	const caInContainer = "/nats-creds/mgmt-tls/ca.crt"
	if !slices.Contains(compose.Services["prometheus"].Volumes, "nats-creds:/nats-creds:ro") {
		t.Errorf("the compose service prometheus does not mount the nats-creds volume, where %s is", caInContainer)
	}
	mgmt, err := mtls.Generate(t.TempDir(), []string{"pkid"}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	// The token of role metrics it scrapes the daemons with, made as nats-creds does.
	const tokenInContainer = "/nats-creds/metrics.token"
	if !strings.Contains(string(cfg), "credentials_file: "+tokenInContainer) {
		t.Errorf("deploy/compose/prometheus.yml does not scrape with %s: the daemons' /metrics answer a token only", tokenInContainer)
	}
	token := filepath.Join(t.TempDir(), "metrics.token")
	if _, _, err := auth.LoadOrCreateTokenFile(token, 0o640); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "prometheus.yml")
	cfgLocal := strings.NewReplacer(inContainer, abs, caInContainer, mgmt.CAFile(), tokenInContainer, token).Replace(string(cfg))
	if err := os.WriteFile(local, []byte(cfgLocal), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", local).CombinedOutput(); err != nil {
		t.Errorf("promtool check config deploy/compose/prometheus.yml (rules at %s): %v\n%s", abs, err, out)
	}
}
