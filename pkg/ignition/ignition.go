// Package ignition is the Ignition side of a NodePool: it parses and validates the pool's
// config documents, renders the Ignition v3 payload a machine fetches from ignitiond and the
// stub (userdata) it boots with, and reads both back.
//
// It is the one place that knows the Ignition spec hostplane speaks (v3.5, from
// github.com/coreos/ignition/v2): nodepoold checks each config document with ParseDocument
// before it stores a pool, ignitiond checks them together with ValidateDocuments and renders
// with Stub and Payload.Render, and a machine (or a test) reads them with ParseStub, Parse and
// FileContents.
//
// A config document's Content is either an Ignition v3 config (JSON, any version from 3.0.0
// to 3.5.0; older versions are translated) or a MachineConfig (YAML or JSON, kind
// MachineConfig) whose spec.config is one. Only spec.config of a MachineConfig is used; its
// other fields (kernelArguments, osImageURL, ...) are ignored. Documents are merged in order
// with Ignition's own merge: a later document's file replaces an earlier one at the same
// path. The files hostplane writes itself (ReservedPaths) cannot be set by a document.
package ignition

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/vcontext/report"
	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
)

// Version is the Ignition spec version of everything hostplane renders.
const Version = "3.5.0"

// MediaType is the Content-Type of an Ignition config served over HTTP.
const MediaType = "application/vnd.coreos.ignition+json"

// Files of the payload, read by the machine to join the guest cluster.
const (
	// PathBootstrapKubeconfig holds a kubeconfig whose user is the pool's guest bootstrap
	// token ("<id>.<secret>") and whose cluster is the guest kube-apiserver, trusting root-ca.
	PathBootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubeconfig"
	// PathCACert is the cluster's root CA (PEM).
	PathCACert = "/etc/kubernetes/pki/ca.crt"
	// PathKubeletConfig is a KubeletConfig (JSON).
	PathKubeletConfig = "/etc/kubernetes/kubelet.json"
)

// ReservedPaths are the files hostplane writes into a payload (a real node's too: Node);
// config documents may not.
var ReservedPaths = append([]string{PathBootstrapKubeconfig, PathCACert, PathKubeletConfig}, nodePaths...)

// KubeletConfig is the content of PathKubeletConfig: what the machine's kubelet registers
// its Node with.
type KubeletConfig struct {
	// NodeLabels are the pool's node labels plus api.LabelNodePool: <nodepool>.
	NodeLabels map[string]string `json:"nodeLabels"`
	Taints     []api.Taint       `json:"taints"`
	// ConfigHash is the config hash the payload was rendered for (the token's, which during
	// a rollout may be an older hash than the pool's); the machine reports it as
	// api.AnnotationCurrentConfig on its Node.
	ConfigHash string `json:"configHash"`
	// KubeletVersion is "v<release>" of that hash.
	KubeletVersion string `json:"kubeletVersion"`
}

// ParseDocument returns the Ignition config of one config document's content, translated to
// spec 3.5. The error says what is wrong, for a user to read.
func ParseDocument(content string) (types.Config, error) {
	raw := bytes.TrimSpace([]byte(content))
	if len(raw) == 0 {
		return types.Config{}, ErrEmptyDocument
	}
	var doc map[string]json.RawMessage
	if raw[0] == '{' {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return types.Config{}, fmt.Errorf("%w: not valid JSON: %v", ErrNotIgnition, err)
		}
	} else {
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return types.Config{}, fmt.Errorf("%w: neither JSON nor YAML: %v", ErrNotIgnition, err)
		}
		if err := json.Unmarshal(j, &doc); err != nil || doc == nil {
			return types.Config{}, fmt.Errorf("%w: a YAML document must be a MachineConfig object", ErrNotIgnition)
		}
	}
	if kind, ok := doc["kind"]; ok {
		var k string
		_ = json.Unmarshal(kind, &k)
		if k != "MachineConfig" {
			return types.Config{}, fmt.Errorf("%w: kind %q is not supported; use an Ignition v3 config or a MachineConfig", ErrNotIgnition, k)
		}
		return machineConfig(doc)
	}
	if _, ok := doc["ignition"]; !ok {
		return types.Config{}, fmt.Errorf("%w: an Ignition config needs \"ignition\": {\"version\": \"3.x.0\"}; a MachineConfig needs \"kind\": \"MachineConfig\"", ErrNotIgnition)
	}
	if raw[0] != '{' {
		return types.Config{}, fmt.Errorf("%w: an Ignition config must be JSON", ErrNotIgnition)
	}
	return parseIgnition(raw, "")
}

// machineConfig returns spec.config of a MachineConfig document.
func machineConfig(doc map[string]json.RawMessage) (types.Config, error) {
	var spec struct {
		Config json.RawMessage `json:"config"`
	}
	if s, ok := doc["spec"]; ok {
		if err := json.Unmarshal(s, &spec); err != nil {
			return types.Config{}, fmt.Errorf("%w: MachineConfig spec is not an object", ErrNotIgnition)
		}
	}
	c := bytes.TrimSpace(spec.Config)
	if len(c) == 0 || c[0] != '{' {
		return types.Config{}, fmt.Errorf("%w: MachineConfig has no spec.config Ignition config", ErrNotIgnition)
	}
	return parseIgnition(c, "spec.config: ")
}

// parseIgnition parses and validates an Ignition config of version 3.0.0 to 3.5.0.
func parseIgnition(raw []byte, prefix string) (types.Config, error) {
	cfg, rpt, err := v3_5.ParseCompatibleVersion(raw)
	if err != nil {
		if detail := reportText(rpt); detail != "" {
			return types.Config{}, fmt.Errorf("%w: %s%v: %s", ErrInvalidIgnition, prefix, err, detail)
		}
		return types.Config{}, fmt.Errorf("%w: %s%v", ErrInvalidIgnition, prefix, err)
	}
	for _, f := range cfg.Storage.Files {
		if slices.Contains(ReservedPaths, f.Path) {
			return types.Config{}, fmt.Errorf("%w: %sstorage.files: %s is written by hostplane", ErrReservedPath, prefix, f.Path)
		}
	}
	for field, src := range sources(cfg) {
		if err := checkSource(src); err != nil {
			return types.Config{}, fmt.Errorf("%w: %s%s: %v", ErrSourceScheme, prefix, field, err)
		}
	}
	return cfg, nil
}

// SourceSchemes are the URL schemes a config document's sources may use: what it embeds
// (data) and what the machine fetches itself over TLS (https). A management process never
// fetches a document's source; http, tftp, s3, gs and arn, which Ignition knows, are refused
// so that no machine fetches its config in the clear or from a cloud's metadata credentials.
var SourceSchemes = []string{"data", "https"}

// sources yields every source URL of cfg with its field path.
func sources(cfg types.Config) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		one := func(field string, r types.Resource) bool {
			return r.Source == nil || *r.Source == "" || yield(field, *r.Source)
		}
		refs := cfg.Ignition.Config
		if !one("ignition.config.replace.source", refs.Replace) {
			return
		}
		for i, r := range refs.Merge {
			if !one(fmt.Sprintf("ignition.config.merge[%d].source", i), r) {
				return
			}
		}
		for i, r := range cfg.Ignition.Security.TLS.CertificateAuthorities {
			if !one(fmt.Sprintf("ignition.security.tls.certificateAuthorities[%d].source", i), r) {
				return
			}
		}
		for i, f := range cfg.Storage.Files {
			if !one(fmt.Sprintf("storage.files[%d] (%s).contents.source", i, f.Path), f.Contents) {
				return
			}
			for j, a := range f.Append {
				if !one(fmt.Sprintf("storage.files[%d] (%s).append[%d].source", i, f.Path, j), a) {
					return
				}
			}
		}
		for i, l := range cfg.Storage.Luks {
			if !one(fmt.Sprintf("storage.luks[%d].keyFile.source", i), l.KeyFile) {
				return
			}
		}
	}
}

func checkSource(src string) error {
	u, err := url.Parse(src)
	if err != nil {
		return fmt.Errorf("source is not a URL: %v", err)
	}
	if !slices.Contains(SourceSchemes, strings.ToLower(u.Scheme)) {
		return fmt.Errorf("scheme %q is not allowed; use %s", u.Scheme, strings.Join(SourceSchemes, " or "))
	}
	return nil
}

// reportText is the fatal entries of rpt, one line each.
func reportText(rpt report.Report) string {
	var lines []string
	for _, e := range rpt.Entries {
		if e.Kind == report.Error {
			lines = append(lines, strings.TrimSpace(e.String()))
		}
	}
	return strings.Join(lines, "; ")
}

// ValidateDocuments checks every config document and returns one field error per document
// that is not a valid Ignition v3 config or MachineConfig, with the field path
// "spec.config[<i>].content" (i counts from 0). When each document is valid on its own it
// also renders them merged with hostplane's files, as a machine would get them; a conflict
// between them (a file under a path another document makes a symlink, say) is reported on
// "spec.config". nil means the documents are usable.
func ValidateDocuments(docs []api.ConfigDocument) []api.FieldError {
	var out []api.FieldError
	for i, d := range docs {
		if _, err := ParseDocument(d.Content); err != nil {
			out = append(out, api.FieldError{
				Field:  fmt.Sprintf("spec.config[%d].content", i),
				Detail: fmt.Sprintf("config document %q: %v", d.Name, err),
			})
		}
	}
	if len(out) > 0 || len(docs) == 0 {
		return out
	}
	probe := Payload{
		BootstrapKubeconfig: []byte("probe"), CACertPEM: []byte("probe"),
		Kubelet: KubeletConfig{ConfigHash: "probe"}, Documents: docs,
	}
	if _, err := probe.Render(); err != nil {
		out = append(out, api.FieldError{Field: "spec.config", Detail: "the documents do not merge into a valid Ignition config: " + err.Error()})
	}
	return out
}

// MergeDocuments parses docs and merges them in order into one config (version Version).
func MergeDocuments(docs []api.ConfigDocument) (types.Config, error) {
	out := types.Config{Ignition: types.Ignition{Version: Version}}
	for i, d := range docs {
		cfg, err := ParseDocument(d.Content)
		if err != nil {
			return types.Config{}, fmt.Errorf("spec.config[%d] (%q): %w", i, d.Name, err)
		}
		out = v3_5.Merge(out, cfg)
	}
	return out, nil
}

// Payload is what a machine of one pool and config hash gets from GET /ignition.
type Payload struct {
	BootstrapKubeconfig []byte
	CACertPEM           []byte
	Kubelet             KubeletConfig
	// Documents are the pool's config documents of that hash.
	Documents []api.ConfigDocument
	// Node, when set, makes the payload boot a real node: the kubelet binary, its unit and
	// configuration, containerd's and the pod network's (node.go). Without it the payload
	// is for a simulated machine of the local platform.
	Node *Node
}

// Render merges the documents and hostplane's files (which win) into one Ignition config,
// validates it and returns its JSON. A config that fails validation wraps ErrInvalidPayload
// and must not be served.
func (p Payload) Render() ([]byte, error) {
	base, err := MergeDocuments(p.Documents)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPayload, err)
	}
	kubelet, err := json.Marshal(p.Kubelet)
	if err != nil {
		return nil, err
	}
	own := types.Config{
		Ignition: types.Ignition{Version: Version},
		Storage: types.Storage{Files: []types.File{
			file(PathBootstrapKubeconfig, 0o600, p.BootstrapKubeconfig),
			file(PathCACert, 0o644, p.CACertPEM),
			file(PathKubeletConfig, 0o644, kubelet),
		}},
	}
	if p.Node != nil {
		node, err := p.Node.config(p.Kubelet)
		if err != nil {
			return nil, err
		}
		own = v3_5.Merge(own, node)
	}
	return render(v3_5.Merge(base, own))
}

// render marshals cfg and validates it the way a machine will parse it.
func render(cfg types.Config) ([]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if _, rpt, err := v3_5.Parse(b); err != nil {
		return nil, fmt.Errorf("%w: %v: %s", ErrInvalidPayload, err, reportText(rpt))
	}
	return b, nil
}

func file(path string, mode int, content []byte) types.File {
	return types.File{
		Node: types.Node{Path: path, Overwrite: new(true)},
		FileEmbedded1: types.FileEmbedded1{
			Mode:     new(mode),
			Contents: types.Resource{Source: new(DataURL(content))},
		},
	}
}

// DataURL is content as a base64 data: URL, as Ignition sources and CAs take it.
func DataURL(content []byte) string {
	return "data:;base64," + base64.StdEncoding.EncodeToString(content)
}

// StubInfo is what a stub (userdata) tells a machine: where its config is, the bearer token
// to fetch it with, and the CA that signs the server.
type StubInfo struct {
	URL   string
	Token string
	CAPEM []byte
}

// Stub renders the Ignition stub of s, at spec StubVersion: a config whose
// ignition.config.merge[0] is s.URL with the header "Authorization: Bearer <s.Token>" and
// whose ignition.security.tls trusts s.CAPEM.
func Stub(s StubInfo) ([]byte, error) {
	cfg := types.Config{Ignition: types.Ignition{
		Version: Version,
		Config: types.IgnitionConfig{Merge: []types.Resource{{
			Source:      new(s.URL),
			HTTPHeaders: types.HTTPHeaders{{Name: "Authorization", Value: new("Bearer " + s.Token)}},
		}}},
		Security: types.Security{TLS: types.TLS{CertificateAuthorities: []types.Resource{{
			Source: new(DataURL(s.CAPEM)),
		}}}},
	}}
	b, err := render(cfg)
	if err != nil {
		return nil, err
	}
	return Downgrade(b, StubVersion)
}

// ParseStub reads a stub rendered by Stub.
func ParseStub(userData []byte) (StubInfo, error) {
	cfg, err := Parse(userData)
	if err != nil {
		return StubInfo{}, err
	}
	var s StubInfo
	merge := cfg.Ignition.Config.Merge
	if len(merge) == 0 || merge[0].Source == nil {
		return StubInfo{}, fmt.Errorf("%w: no ignition.config.merge source", ErrNotStub)
	}
	s.URL = *merge[0].Source
	for _, h := range merge[0].HTTPHeaders {
		if h.Name == "Authorization" && h.Value != nil {
			s.Token, _ = strings.CutPrefix(*h.Value, "Bearer ")
		}
	}
	if cas := cfg.Ignition.Security.TLS.CertificateAuthorities; len(cas) > 0 && cas[0].Source != nil {
		if s.CAPEM, err = decodeDataURL(*cas[0].Source); err != nil {
			return StubInfo{}, err
		}
	}
	if s.Token == "" || len(s.CAPEM) == 0 {
		return StubInfo{}, fmt.Errorf("%w: no bearer token or CA", ErrNotStub)
	}
	return s, nil
}

// Parse parses and validates an Ignition config of any version from 3.0.0 to Version, as a
// machine's Ignition does, translated to Version.
func Parse(b []byte) (types.Config, error) {
	cfg, rpt, err := v3_5.ParseCompatibleVersion(b)
	if err != nil {
		return types.Config{}, fmt.Errorf("%w: %v: %s", ErrInvalidIgnition, err, reportText(rpt))
	}
	return cfg, nil
}

// FileContents returns the decoded content of the file at path in cfg (a data: URL source).
func FileContents(cfg types.Config, path string) ([]byte, error) {
	for _, f := range cfg.Storage.Files {
		if f.Path == path {
			if f.Contents.Source == nil {
				return nil, nil
			}
			return decodeDataURL(*f.Contents.Source)
		}
	}
	return nil, fmt.Errorf("%s: %w", path, ErrNoFile)
}

func decodeDataURL(s string) ([]byte, error) {
	u, err := dataurl.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotDataURL, err)
	}
	return u.Data, nil
}
