package ignition_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// FuzzParseDocument: a user's config document through ParseDocument, ValidateDocuments (after
// a good document, as spec.config[1]) and the payload render never panics, and documents that
// ValidateDocuments accepts render into a payload a machine parses, with hostplane's files
// intact.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		ignition34, ignition30, machineCfg, machineCfgJSON,
		`{"ignition":{"version":"3.5.0"}}`, `{"ignition":{"version":"2.3.0"}}`, `{"ignition":{"version":"3.6.0-experimental"}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/kubernetes","target":"/tmp"}]}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubelet.json","contents":{"source":"data:,x"}}]}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"relative","contents":{"source":"data:,x"}}]}}`,
		"kind: MachineConfig\nspec:\n  config: {}\n", "kind: Secret\n", "ignition:\n  version: 3.4.0\n", "- a\n- b\n",
		`{"kind":"MachineConfig","spec":[]}`, `{"kind":7}`, `{"ignition":`, "  \n", "null", "[]", "&a [*a]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		if _, err := ignition.ParseDocument(content); err != nil {
			return
		}
		docs := []api.ConfigDocument{{Name: "base", Content: ignition34}, {Name: "fuzz", Content: content}}
		if errs := ignition.ValidateDocuments(docs); errs != nil {
			return
		}
		p := ignition.Payload{
			BootstrapKubeconfig: []byte("apiVersion: v1\nkind: Config\n"), CACertPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
			Kubelet:   ignition.KubeletConfig{ConfigHash: "0123abcd", KubeletVersion: "v1.34.4"},
			Documents: docs,
		}
		b, err := p.Render()
		if err != nil {
			t.Fatalf("document %q is valid but does not render: %v", content, err)
		}
		cfg, err := ignition.Parse(b)
		if err != nil {
			t.Fatalf("document %q renders %s, which a machine cannot parse: %v", content, b, err)
		}
		if got, err := ignition.FileContents(cfg, ignition.PathCACert); err != nil || !bytes.Equal(got, p.CACertPEM) {
			t.Fatalf("document %q: %s = %q, %v; want hostplane's", content, ignition.PathCACert, got, err)
		}
	})
}

// FuzzParseStub: userdata through ParseStub never panics, refuses with this package's errors,
// and a stub it reads renders again (Stub) into one it reads the same.
func FuzzParseStub(f *testing.F) {
	stub, err := ignition.Stub(ignition.StubInfo{URL: "https://127.0.0.1:1234/ignition", Token: "tok",
		CAPEM: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")})
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range [][]byte{stub, []byte(ignition34), []byte(`{"ignition":{"version":"3.5.0"}}`), []byte(`{`), nil,
		[]byte(`{"ignition":{"version":"3.5.0","config":{"merge":[{"source":"https://x/ignition"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:;base64,!!"}]}}}}`),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, userData []byte) {
		s, err := ignition.ParseStub(userData)
		if err != nil {
			if !errors.Is(err, ignition.ErrInvalidIgnition) && !errors.Is(err, ignition.ErrNotStub) && !errors.Is(err, ignition.ErrNotDataURL) {
				t.Fatalf("ParseStub(%q) = %v, want one of the package's errors", userData, err)
			}
			return
		}
		again, err := ignition.Stub(s)
		if err != nil {
			return // a stub hostplane would not render (a URL Ignition refuses to fetch, say)
		}
		s2, err := ignition.ParseStub(again)
		if err != nil || s2.URL != s.URL || s2.Token != s.Token || !bytes.Equal(s2.CAPEM, s.CAPEM) {
			t.Fatalf("ParseStub(%q) = %+v; rendered again and read back: %+v, %v", userData, s, s2, err)
		}
	})
}
