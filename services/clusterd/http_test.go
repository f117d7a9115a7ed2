package clusterd

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

func TestCreateCluster_StoresDefaultedSpecAndAnswers202(t *testing.T) {
	e := start(t)
	status, _, body := e.do(http.MethodPost, "/v1/clusters", "application/json", `{"name":"demo","spec":{"release":{"version":"1.34.4"}}}`)
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	var c api.Cluster
	decode(t, body, &c)
	want := api.ClusterSpec{
		Release:                      api.Release{Version: "1.34.4"},
		Platform:                     api.Platform{Type: api.PlatformLocal},
		ControllerAvailabilityPolicy: api.SingleReplica,
		Networking:                   api.Networking{ServiceCIDR: api.DefaultServiceCIDR, PodCIDR: api.DefaultPodCIDR},
		// Secrets are encrypted at rest unless the user says otherwise.
		SecretEncryption: &api.SecretEncryptionSpec{Type: api.SecretEncryptionAESCBC},
	}
	if c.Name != "demo" || c.Generation != 1 || c.CreationTimestamp.IsZero() || !reflect.DeepEqual(c.Spec, want) {
		t.Fatalf("created %+v", c)
	}
	got := e.get("demo")
	if got == nil || !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("GET returned %+v", got)
	}
}

func TestCreateCluster_WhenNameExists_Answers409(t *testing.T) {
	e := start(t)
	e.create("demo", "1.34.4")
	status, hdr, body := e.do(http.MethodPost, "/v1/clusters", "application/json", `{"name":"demo","spec":{"release":{"version":"1.33.13"}}}`)
	if status != http.StatusConflict || hdr.Get("Content-Type") != httpapi.ContentTypeProblem {
		t.Fatalf("status %d %s: %s", status, hdr.Get("Content-Type"), body)
	}
	if p := problem(t, body); !strings.Contains(p.Detail, `"demo" already exists`) {
		t.Fatalf("detail %q", p.Detail)
	}
}

func TestCreateCluster_WhenBodyIsBad_Answers400NamingTheField(t *testing.T) {
	e := start(t)
	tests := []struct {
		name, body string
		fields     []string // named in the problem's errors
		detail     string
	}{
		{name: "not JSON", body: `{"name":`, detail: "not valid JSON"},
		{name: "unknown field", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},"replicas":3}}`, fields: []string{"spec.replicas"}},
		{name: "wrong type", body: `{"name":"demo","spec":{"release":{"version":1.34}}}`, fields: []string{"spec.release.version"}},
		{name: "bad name", body: `{"name":"Demo_1","spec":{"release":{"version":"1.34.4"}}}`, fields: []string{"name"}},
		{name: "unknown release", body: `{"name":"demo","spec":{"release":{"version":"1.30.0"}}}`, fields: []string{"spec.release.version"}, detail: ""},
		{name: "every spec field", body: `{"name":"demo","spec":{"release":{"version":"9"},"platform":{"type":"aws"},` +
			`"controllerAvailabilityPolicy":"Many","networking":{"serviceCIDR":"10.0.0.0/33","podCIDR":"10.0.0.0/16"},` +
			`"pki":{"caLifetime":"forever","leafLifetime":"1d"}}}`,
			fields: []string{"spec.release.version", "spec.platform.type", "spec.controllerAvailabilityPolicy",
				"spec.networking.serviceCIDR", "spec.pki.caLifetime", "spec.pki.leafLifetime"}},
		{name: "kms Secret encryption", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},"secretEncryption":{"type":"kms"}}}`,
			fields: []string{"spec.secretEncryption.type"}},
		{name: "Secret encryption off", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},"secretEncryption":{"type":"identity"}}}`,
			fields: []string{"spec.secretEncryption.type"}},
		{name: "Secret encryption with a key of the user's", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},` +
			`"secretEncryption":{"type":"aescbc","aescbc":{"activeKey":{"name":"mine"}}}}}`, fields: []string{"spec.secretEncryption.aescbc"}},
		{name: "overlapping networks", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},` +
			`"networking":{"serviceCIDR":"10.96.0.0/16","podCIDR":"10.0.0.0/8"}}}`, fields: []string{"spec.networking.podCIDR"}},
		{name: "bad audit settings", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},` +
			`"configuration":{"apiServer":{"audit":{"profile":"Everything","maxAgeDays":-1,"maxBackups":1000,"maxSizeMB":2048}}}}}`,
			fields: []string{"spec.configuration.apiServer.audit.profile", "spec.configuration.apiServer.audit.maxAgeDays",
				"spec.configuration.apiServer.audit.maxBackups", "spec.configuration.apiServer.audit.maxSizeMB"}},
		{name: "unknown audit field", body: `{"name":"demo","spec":{"release":{"version":"1.34.4"},` +
			`"configuration":{"apiServer":{"audit":{"policy":"Default"}}}}}`, fields: []string{"spec.configuration.apiServer.audit.policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.do(http.MethodPost, "/v1/clusters", "application/json", tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, body)
			}
			p := problem(t, body)
			var got []string
			for _, f := range p.Errors {
				got = append(got, f.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Fatalf("fields %v, want %v (%s)", got, tt.fields, body)
			}
			if tt.detail != "" && !strings.Contains(p.Detail, tt.detail) {
				t.Fatalf("detail %q does not contain %q", p.Detail, tt.detail)
			}
		})
	}
	t.Run("the unknown release's message lists the known ones", func(t *testing.T) {
		_, _, body := e.do(http.MethodPost, "/v1/clusters", "application/json", `{"name":"demo","spec":{"release":{"version":"1.30.0"}}}`)
		if p := problem(t, body); len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Detail, "1.33.13, 1.34.4") {
			t.Fatalf("problem %+v", p)
		}
	})
	if status, _, body := e.do(http.MethodGet, "/v1/clusters", "", ""); status != http.StatusOK || strings.Contains(string(body), "demo") {
		t.Fatalf("a rejected cluster was stored: %d %s", status, body)
	}
}

func TestListClusters_ReturnsItemsSortedByName(t *testing.T) {
	e := start(t)
	status, _, body := e.do(http.MethodGet, "/v1/clusters", "", "")
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"items":[]}` {
		t.Fatalf("empty list: %d %s", status, body)
	}
	for _, n := range []string{"zeta", "alpha", "mid"} {
		e.create(n, "1.34.4")
	}
	_, _, body = e.do(http.MethodGet, "/v1/clusters", "", "")
	var list api.ClusterList
	decode(t, body, &list)
	var names []string
	for _, c := range list.Items {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"alpha", "mid", "zeta"}) {
		t.Fatalf("names %v", names)
	}
}

func TestGetCluster_WhenAbsent_Answers404Problem(t *testing.T) {
	e := start(t)
	for _, name := range []string{"nope", "Not.A.Name"} {
		status, hdr, body := e.do(http.MethodGet, "/v1/clusters/"+name, "", "")
		if status != http.StatusNotFound || hdr.Get("Content-Type") != httpapi.ContentTypeProblem {
			t.Fatalf("%s: %d %s", name, status, body)
		}
	}
}

func TestPatchCluster_UpgradeByOneMinor_BumpsGeneration(t *testing.T) {
	e := start(t)
	e.create("demo", "1.33.13")
	status, _, body := e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"release":{"version":"1.34.4"}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var c api.Cluster
	decode(t, body, &c)
	if c.Spec.Release.Version != "1.34.4" || c.Generation != 2 {
		t.Fatalf("patched %+v", c)
	}
	// The object-shaped patch kubectl sends works too; an unchanged spec keeps the generation.
	status, _, body = e.do(http.MethodPatch, "/v1/clusters/demo", "application/json", `{"spec":{"release":{"version":"1.34.4"}}}`)
	decode(t, body, &c)
	if status != http.StatusOK || c.Generation != 2 {
		t.Fatalf("no-op patch: %d generation %d", status, c.Generation)
	}
	// Setting and then removing (null) the PKI settings are changes.
	status, _, body = e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"pki":{"leafLifetime":"30m"}}`)
	decode(t, body, &c)
	if status != http.StatusOK || c.Generation != 3 || c.Spec.PKI == nil || c.Spec.PKI.LeafLifetime != "30m" {
		t.Fatalf("pki patch: %d %s", status, body)
	}
	status, _, body = e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"pki":null}`)
	c = api.Cluster{}
	decode(t, body, &c)
	if status != http.StatusOK || c.Generation != 4 || c.Spec.PKI != nil {
		t.Fatalf("pki removal: %d %s", status, body)
	}
	if got := e.get("demo"); got.Spec.Release.Version != "1.34.4" || got.Generation != 4 {
		t.Fatalf("stored %+v", got)
	}
}

func TestPatchCluster_AuditProfile_ChangesAndDefaultsTheRest(t *testing.T) {
	e := start(t)
	e.create("demo", "1.34.4")
	status, _, body := e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json",
		`{"configuration":{"apiServer":{"audit":{"profile":"WriteRequestBodies","maxBackups":10}}}}`)
	var c api.Cluster
	decode(t, body, &c)
	want := api.Audit{Profile: api.AuditWriteRequestBodies, MaxAgeDays: api.DefaultAuditMaxAgeDays, MaxBackups: 10, MaxSizeMB: api.DefaultAuditMaxSizeMB}
	if status != http.StatusOK || c.Generation != 2 || c.Spec.Configuration == nil || *c.Spec.Configuration.APIServer.Audit != want {
		t.Fatalf("audit patch: %d %s", status, body)
	}
	status, _, body = e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"configuration":{"apiServer":{"audit":{"profile":"None"}}}}`)
	c = api.Cluster{}
	decode(t, body, &c)
	want.Profile = api.AuditNone
	if status != http.StatusOK || c.Generation != 3 || *c.Spec.Configuration.APIServer.Audit != want {
		t.Fatalf("profile change: %d %s", status, body)
	}
	if got := e.get("demo"); got.Spec.EffectiveAudit() != want {
		t.Fatalf("stored audit %+v, want %+v", got.Spec.EffectiveAudit(), want)
	}
}

func TestPatchCluster_RefusesBadChanges(t *testing.T) {
	e := start(t)
	e.create("demo", "1.34.4")
	tests := []struct {
		name, patch string
		status      int
		field       string
		detail      string
	}{
		{name: "downgrade", patch: `{"release":{"version":"1.33.13"}}`, status: 400, field: "spec.release.version", detail: "cannot downgrade"},
		{name: "unknown release", patch: `{"release":{"version":"1.36.0"}}`, status: 400, field: "spec.release.version", detail: "known releases"},
		{name: "platform", patch: `{"platform":{"type":"none"}}`, status: 400, field: "spec.platform.type", detail: "immutable"},
		{name: "availability policy", patch: `{"spec":{"controllerAvailabilityPolicy":"HighlyAvailable"}}`, status: 400, field: "spec.controllerAvailabilityPolicy", detail: "immutable"},
		{name: "networking", patch: `{"networking":{"podCIDR":"10.200.0.0/16"}}`, status: 400, field: "spec.networking.podCIDR", detail: "immutable"},
		{name: "unknown field", patch: `{"release":{"versoin":"1.34.4"}}`, status: 400, field: "spec.release.versoin"},
		{name: "mistyped field", patch: `{"release":{"version":134}}`, status: 400, field: "spec.release.version"},
		{name: "status", patch: `{"status":{"observedGeneration":9}}`, status: 400, field: "status"},
		{name: "kms Secret encryption", patch: `{"secretEncryption":{"type":"kms"}}`, status: 400, field: "spec.secretEncryption.type", detail: "not supported on this platform yet"},
		{name: "bad lifetime", patch: `{"pki":{"caLifetime":"soon"}}`, status: 400, field: "spec.pki.caLifetime"},
		{name: "a leaf lifetime shorter than 10 minutes", patch: `{"spec":{"pki":{"leafLifetime":"5m"}}}`, status: 400, field: "spec.pki.leafLifetime", detail: "from 10m"},
		{name: "backups every minute", patch: `{"spec":{"etcd":{"backup":{"schedule":"* * * * *"}}}}`, status: 400,
			field: "spec.etcd.backup.schedule", detail: "fires every 1m0s; backups may be taken at most every 5m0s"},
		{name: "backups every two minutes", patch: `{"spec":{"etcd":{"backup":{"schedule":"@every 2m"}}}}`, status: 400,
			field: "spec.etcd.backup.schedule", detail: "at most every 5m0s"},
		{name: "bad audit profile", patch: `{"configuration":{"apiServer":{"audit":{"profile":"default"}}}}`, status: 400,
			field: "spec.configuration.apiServer.audit.profile", detail: "Default, WriteRequestBodies, AllRequestBodies, None"},
		{name: "not an object", patch: `[1]`, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", tt.patch)
			if status != tt.status {
				t.Fatalf("status %d: %s", status, body)
			}
			p := problem(t, body)
			if tt.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != tt.field || !strings.Contains(p.Errors[0].Detail, tt.detail)) {
				t.Fatalf("errors %+v, want %s mentioning %q", p.Errors, tt.field, tt.detail)
			}
		})
	}
	if c := e.get("demo"); c.Generation != 1 || c.Spec.Release.Version != "1.34.4" {
		t.Fatalf("a refused patch changed the cluster: %+v", c)
	}
	if status, _, _ := e.do(http.MethodPatch, "/v1/clusters/nope", "application/json", `{}`); status != http.StatusNotFound {
		t.Fatalf("patch of an absent cluster: %d", status)
	}
	if status, _, _ := e.do(http.MethodPatch, "/v1/clusters/demo", "text/plain", `{}`); status != http.StatusUnsupportedMediaType {
		t.Fatalf("patch as text/plain: %d", status)
	}
}

func TestPatchCluster_WhileDeleting_Answers409(t *testing.T) {
	e := start(t)
	e.create("demo", "1.33.13")
	e.putInfra("demo", true) // keeps the cluster from vanishing at once
	if status, _, body := e.do(http.MethodDelete, "/v1/clusters/demo", "", ""); status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", status, body)
	}
	status, _, body := e.do(http.MethodPatch, "/v1/clusters/demo", "application/merge-patch+json", `{"release":{"version":"1.34.4"}}`)
	if status != http.StatusConflict || !strings.Contains(problem(t, body).Detail, "being deleted") {
		t.Fatalf("status %d: %s", status, body)
	}
}

// The installation holds at most --max-clusters clusters: one more is a 409 that says so
// until one is deleted; creating one that exists is still the usual conflict.
func TestCreateCluster_RefusesOneMoreThanTheInstallationHolds(t *testing.T) {
	e := startWith(t, "", func(c *Config) { c.MaxClusters = 2 })
	e.create("one", "1.34.4")
	e.create("two", "1.34.4")
	status, _, body := e.do(http.MethodPost, "/v1/clusters", "application/json", `{"name":"three","spec":{"release":{"version":"1.34.4"}}}`)
	if status != http.StatusConflict || !strings.Contains(string(body), "--max-clusters 2") {
		t.Fatalf("a third cluster: %d %s; want 409 naming the quota", status, body)
	}
	status, _, body = e.do(http.MethodPost, "/v1/clusters", "application/json", `{"name":"two","spec":{"release":{"version":"1.34.4"}}}`)
	if status != http.StatusConflict || !strings.Contains(string(body), "already exists") {
		t.Fatalf("an existing cluster again: %d %s; want 409 already exists", status, body)
	}
}
