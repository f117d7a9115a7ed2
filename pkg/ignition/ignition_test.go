package ignition_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

const (
	ignition34 = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hello","contents":{"source":"data:,hello"},"mode":420}]}}`
	ignition30 = `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/old","contents":{"source":"data:,old"}}]}}`
	machineCfg = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: motd
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/motd
        contents:
          source: data:,welcome
`
	machineCfgJSON = `{"kind":"MachineConfig","spec":{"config":{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"hello.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}}`
)

func TestParseDocument_AcceptsIgnitionAndMachineConfigs(t *testing.T) {
	for name, content := range map[string]string{
		"ignition 3.4": ignition34, "ignition 3.0 (translated)": ignition30,
		"MachineConfig YAML": machineCfg, "MachineConfig JSON": machineCfgJSON,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ignition.ParseDocument(content)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ignition.Version != ignition.Version {
				t.Errorf("version %q, want %q", cfg.Ignition.Version, ignition.Version)
			}
			if len(cfg.Storage.Files)+len(cfg.Systemd.Units) == 0 {
				t.Error("the document's files and units are lost")
			}
		})
	}
}

func TestValidateDocuments_ReportsEachBadDocumentByItsFieldPath(t *testing.T) {
	tests := []struct {
		name, content string
		want          error
		detail        string
	}{
		{"empty", "  \n", ignition.ErrEmptyDocument, "empty"},
		{"plain text", "hello world", ignition.ErrNotIgnition, "MachineConfig"},
		{"another kind", "kind: KubeletConfig\nspec: {}\n", ignition.ErrNotIgnition, `kind "KubeletConfig"`},
		{"JSON without ignition", `{"storage":{}}`, ignition.ErrNotIgnition, `"ignition"`},
		{"ignition YAML", "ignition:\n  version: 3.4.0\n", ignition.ErrNotIgnition, "must be JSON"},
		{"ignition spec 2", `{"ignition":{"version":"2.2.0"}}`, ignition.ErrInvalidIgnition, "version"},
		{"relative path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"etc/x"}]}}`, ignition.ErrInvalidIgnition, "absolute"},
		{"MachineConfig without config", "kind: MachineConfig\nspec:\n  osImageURL: x\n", ignition.ErrNotIgnition, "spec.config"},
		{"reserved path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubelet.json"}]}}`, ignition.ErrReservedPath, "/etc/kubernetes/kubelet.json"},
		{"broken JSON", `{"ignition":`, ignition.ErrNotIgnition, "JSON"},
		{"file from plain http", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"http://169.254.169.254/latest/meta-data"}}]}}`, ignition.ErrSourceScheme, `storage.files[0] (/etc/x).contents.source: scheme "http"`},
		{"append from s3", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","append":[{"source":"s3://bucket/key"}]}]}}`, ignition.ErrSourceScheme, `append[0].source: scheme "s3"`},
		{"merge over tftp", `{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"tftp://10.0.0.1/cfg"}]}}}`, ignition.ErrSourceScheme, `ignition.config.merge[0].source: scheme "tftp"`},
		{"replace from gs", `{"ignition":{"version":"3.4.0","config":{"replace":{"source":"gs://b/o"}}}}`, ignition.ErrSourceScheme, `ignition.config.replace.source`},
		{"CA from http", `{"ignition":{"version":"3.4.0","security":{"tls":{"certificateAuthorities":[{"source":"http://x/ca.pem"}]}}}}`, ignition.ErrSourceScheme, `certificateAuthorities[0].source`},
		{"MachineConfig file from http", "kind: MachineConfig\nspec:\n  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files: [{path: /etc/y, contents: {source: 'http://x/y'}}]\n", ignition.ErrSourceScheme, "spec.config: storage.files[0] (/etc/y)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ignition.ParseDocument(tt.content); !errors.Is(err, tt.want) {
				t.Fatalf("ParseDocument: %v, want %v", err, tt.want)
			}
			docs := []api.ConfigDocument{{Name: "good", Content: ignition34}, {Name: "bad", Content: tt.content}}
			errs := ignition.ValidateDocuments(docs)
			if len(errs) != 1 || errs[0].Field != "spec.config[1].content" {
				t.Fatalf("ValidateDocuments = %+v, want one error on spec.config[1].content", errs)
			}
			if !strings.Contains(errs[0].Detail, `"bad"`) || !strings.Contains(errs[0].Detail, tt.detail) {
				t.Errorf("detail %q does not name the document and say %q", errs[0].Detail, tt.detail)
			}
		})
	}
}

func TestValidateDocuments_AcceptsGoodDocumentsAndReportsConflictsBetweenThem(t *testing.T) {
	if errs := ignition.ValidateDocuments([]api.ConfigDocument{{Name: "a", Content: ignition34}, {Name: "b", Content: machineCfg}}); errs != nil {
		t.Fatalf("good documents: %+v", errs)
	}
	if errs := ignition.ValidateDocuments(nil); errs != nil {
		t.Fatalf("no documents: %+v", errs)
	}
	// The machine fetches https sources itself; data sources are embedded.
	remote := `{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://configs.example/extra.ign"}]}},` +
		`"storage":{"files":[{"path":"/etc/a","contents":{"source":"https://configs.example/a","verification":{"hash":"sha256-` + strings.Repeat("0", 64) + `"}}},` +
		`{"path":"/etc/b","contents":{"source":"data:,b"},"append":[{"source":"HTTPS://configs.example/b"}]}]}}`
	if errs := ignition.ValidateDocuments([]api.ConfigDocument{{Name: "remote", Content: remote}}); errs != nil {
		t.Fatalf("https and data sources: %+v", errs)
	}
	// Each is valid alone; merged, hostplane's files would go through a symlink.
	link := `{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/kubernetes","target":"/tmp"}]}}`
	errs := ignition.ValidateDocuments([]api.ConfigDocument{{Name: "link", Content: link}})
	if len(errs) != 1 || errs[0].Field != "spec.config" {
		t.Fatalf("ValidateDocuments = %+v, want one error on spec.config", errs)
	}
}

func TestPayloadRender_MergesDocumentsUnderHostplanesFilesAndValidates(t *testing.T) {
	p := ignition.Payload{
		BootstrapKubeconfig: []byte("kubeconfig"),
		CACertPEM:           []byte("ca"),
		Kubelet: ignition.KubeletConfig{
			NodeLabels: map[string]string{api.LabelNodePool: "workers"}, Taints: []api.Taint{},
			ConfigHash: "abc", KubeletVersion: "v1.34.4",
		},
		Documents: []api.ConfigDocument{{Name: "a", Content: ignition34}, {Name: "b", Content: machineCfg}},
	}
	b, err := p.Render()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ignition.Parse(b)
	if err != nil {
		t.Fatalf("the rendered payload does not parse: %v", err)
	}
	want := map[string]string{
		ignition.PathBootstrapKubeconfig: "kubeconfig", ignition.PathCACert: "ca",
		"/etc/hello": "hello", "/etc/motd": "welcome",
	}
	for path, content := range want {
		got, err := ignition.FileContents(cfg, path)
		if err != nil || string(got) != content {
			t.Errorf("%s = %q, %v; want %q", path, got, err, content)
		}
	}
	kj, err := ignition.FileContents(cfg, ignition.PathKubeletConfig)
	if err != nil {
		t.Fatal(err)
	}
	var k ignition.KubeletConfig
	if err := json.Unmarshal(kj, &k); err != nil || k.ConfigHash != "abc" || k.KubeletVersion != "v1.34.4" || k.NodeLabels[api.LabelNodePool] != "workers" {
		t.Errorf("kubelet.json = %s (%v)", kj, err)
	}

	p.Documents = []api.ConfigDocument{{Name: "link", Content: `{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/kubernetes","target":"/tmp"}]}}`}}
	if _, err := p.Render(); !errors.Is(err, ignition.ErrInvalidPayload) {
		t.Fatalf("a payload whose files go through a symlink rendered: %v", err)
	}
}

func TestStub_RoundTrips(t *testing.T) {
	in := ignition.StubInfo{URL: "https://127.0.0.1:1234/ignition", Token: "tok", CAPEM: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")}
	b, err := ignition.Stub(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ignition.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Ignition.Config.Merge
	if len(m) != 1 || *m[0].Source != in.URL || m[0].HTTPHeaders[0].Name != "Authorization" || *m[0].HTTPHeaders[0].Value != "Bearer tok" {
		t.Fatalf("merge = %+v", m)
	}
	if src := *cfg.Ignition.Security.TLS.CertificateAuthorities[0].Source; !strings.HasPrefix(src, "data:") {
		t.Errorf("CA source %q is not a data URL", src)
	}
	out, err := ignition.ParseStub(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.URL != in.URL || out.Token != in.Token || !bytes.Equal(out.CAPEM, in.CAPEM) {
		t.Errorf("ParseStub = %+v, want %+v", out, in)
	}
	if _, err := ignition.ParseStub([]byte(ignition34)); err == nil {
		t.Error("a config that is not a stub parsed as one")
	}
}
