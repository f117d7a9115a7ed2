package dev_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// goTypes are the Go types the document's x-go-type extensions may name.
var goTypes = map[string]reflect.Type{
	"api.Cluster":                     reflect.TypeFor[api.Cluster](),
	"api.ClusterSpec":                 reflect.TypeFor[api.ClusterSpec](),
	"api.KubeconfigRequest":           reflect.TypeFor[api.KubeconfigRequest](),
	"api.ClusterStatus":               reflect.TypeFor[api.ClusterStatus](),
	"api.ClusterList":                 reflect.TypeFor[api.ClusterList](),
	"api.Release":                     reflect.TypeFor[api.Release](),
	"api.Platform":                    reflect.TypeFor[api.Platform](),
	"api.Networking":                  reflect.TypeFor[api.Networking](),
	"api.PKISpec":                     reflect.TypeFor[api.PKISpec](),
	"api.ClusterAutoscaling":          reflect.TypeFor[api.ClusterAutoscaling](),
	"api.ScaleDownConfig":             reflect.TypeFor[api.ScaleDownConfig](),
	"api.AutoNode":                    reflect.TypeFor[api.AutoNode](),
	"api.ProvisionerConfig":           reflect.TypeFor[api.ProvisionerConfig](),
	"api.ClusterConfiguration":        reflect.TypeFor[api.ClusterConfiguration](),
	"api.APIServerConfiguration":      reflect.TypeFor[api.APIServerConfiguration](),
	"api.Audit":                       reflect.TypeFor[api.Audit](),
	"api.AuditEvent":                  reflect.TypeFor[api.AuditEvent](),
	"api.AuditEventList":              reflect.TypeFor[api.AuditEventList](),
	"api.AuditUser":                   reflect.TypeFor[api.AuditUser](),
	"api.AuditObjectRef":              reflect.TypeFor[api.AuditObjectRef](),
	"api.AuditStatus":                 reflect.TypeFor[api.AuditStatus](),
	"api.SecretEncryptionSpec":        reflect.TypeFor[api.SecretEncryptionSpec](),
	"api.SecretEncryptionStatus":      reflect.TypeFor[api.SecretEncryptionStatus](),
	"api.EncryptionKeyInfo":           reflect.TypeFor[api.EncryptionKeyInfo](),
	"api.EncryptionKeyRotation":       reflect.TypeFor[api.EncryptionKeyRotation](),
	"api.VersionStatus":               reflect.TypeFor[api.VersionStatus](),
	"api.UpdateHistory":               reflect.TypeFor[api.UpdateHistory](),
	"api.Endpoint":                    reflect.TypeFor[api.Endpoint](),
	"api.Condition":                   reflect.TypeFor[api.Condition](),
	"api.ControlPlaneComponent":       reflect.TypeFor[api.ControlPlaneComponent](),
	"api.ControlPlaneComponentSpec":   reflect.TypeFor[api.ControlPlaneComponentSpec](),
	"api.ControlPlaneComponentStatus": reflect.TypeFor[api.ControlPlaneComponentStatus](),
	"api.ReplicaStatus":               reflect.TypeFor[api.ReplicaStatus](),
	"api.ComponentList":               reflect.TypeFor[api.ComponentList](),
	"api.ReleaseInfo":                 reflect.TypeFor[api.ReleaseInfo](),
	"api.ReleaseList":                 reflect.TypeFor[api.ReleaseList](),
	"api.PKIStatus":                   reflect.TypeFor[api.PKIStatus](),
	"api.ResealStatus":                reflect.TypeFor[api.ResealStatus](),
	"api.CertInfo":                    reflect.TypeFor[api.CertInfo](),
	"api.Infra":                       reflect.TypeFor[api.Infra](),
	"api.EtcdMember":                  reflect.TypeFor[api.EtcdMember](),
	"api.Machine":                     reflect.TypeFor[api.Machine](),
	"api.MachineList":                 reflect.TypeFor[api.MachineList](),
	"api.MachineFault":                reflect.TypeFor[api.MachineFault](),
	"api.InstanceType":                reflect.TypeFor[api.InstanceType](),
	"api.InstanceTypeList":            reflect.TypeFor[api.InstanceTypeList](),
	"api.NodePoolPlatform":            reflect.TypeFor[api.NodePoolPlatform](),
	"api.LocalNodePoolPlatform":       reflect.TypeFor[api.LocalNodePoolPlatform](),
	"api.NodePool":                    reflect.TypeFor[api.NodePool](),
	"api.NodePoolSpec":                reflect.TypeFor[api.NodePoolSpec](),
	"api.NodePoolStatus":              reflect.TypeFor[api.NodePoolStatus](),
	"api.NodePoolList":                reflect.TypeFor[api.NodePoolList](),
	"api.NodePoolAutoScaling":         reflect.TypeFor[api.NodePoolAutoScaling](),
	"api.NodePoolAutoscalingStatus":   reflect.TypeFor[api.NodePoolAutoscalingStatus](),
	"api.ScaleEvent":                  reflect.TypeFor[api.ScaleEvent](),
	"api.NodePoolManagement":          reflect.TypeFor[api.NodePoolManagement](),
	"api.ReplaceUpgrade":              reflect.TypeFor[api.ReplaceUpgrade](),
	"api.RollingUpdate":               reflect.TypeFor[api.RollingUpdate](),
	"api.InPlaceUpgrade":              reflect.TypeFor[api.InPlaceUpgrade](),
	"api.AutoRepairPolicy":            reflect.TypeFor[api.AutoRepairPolicy](),
	"api.Taint":                       reflect.TypeFor[api.Taint](),
	"api.ConfigDocument":              reflect.TypeFor[api.ConfigDocument](),
	"api.FieldError":                  reflect.TypeFor[api.FieldError](),
	"api.Backup":                      reflect.TypeFor[api.Backup](),
	"api.BackupSpec":                  reflect.TypeFor[api.BackupSpec](),
	"api.BackupStatus":                reflect.TypeFor[api.BackupStatus](),
	"api.BackupList":                  reflect.TypeFor[api.BackupList](),
	"api.EtcdSpec":                    reflect.TypeFor[api.EtcdSpec](),
	"api.EtcdBackupSchedule":          reflect.TypeFor[api.EtcdBackupSchedule](),
	"api.RestoreSource":               reflect.TypeFor[api.RestoreSource](),
	"api.Hibernation":                 reflect.TypeFor[api.Hibernation](),
	"api.HibernationSchedule":         reflect.TypeFor[api.HibernationSchedule](),
	"api.HibernationStatus":           reflect.TypeFor[api.HibernationStatus](),
	"httpapi.Problem":                 reflect.TypeFor[httpapi.Problem](),
	"events.Event":                    reflect.TypeFor[events.Event](),
}

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "patch", "delete", "head", "options"}

// openAPIDoc is the document as generic JSON.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc
}

// operations returns "METHOD /path" → operation object.
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	paths, _ := doc["paths"].(map[string]any)
	for p, item := range paths {
		for k, v := range item.(map[string]any) {
			if slices.Contains(httpMethods, k) {
				out[strings.ToUpper(k)+" "+p] = v.(map[string]any)
			}
		}
	}
	return out
}

// frontDoor builds the real front door's router: the six daemons (not started: their
// handlers answer 503, which is all routing and access control need) behind authn.
func frontDoor(t *testing.T, authn *auth.Authenticator) chi.Router {
	t.Helper()
	dir := t.TempDir()
	ds, err := dev.Daemons(func() daemon.Base {
		return daemon.Base{NATSURL: "nats://127.0.0.1:1", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dev.Router(httpapi.Config{Name: "frontdoor"}, authn, ds...)
}

// routes lists "METHOD /pattern" of every route the router serves.
func routes(t *testing.T, r chi.Router) []string {
	t.Helper()
	var out []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestOpenAPI_DocumentsEveryRegisteredRouteAndNoOther(t *testing.T) {
	doc := openAPIDoc(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi = %q, want 3.x", v)
	}
	ops := operations(t, doc)
	registered := routes(t, frontDoor(t, nil))
	for _, r := range registered {
		if _, ok := ops[r]; !ok {
			t.Errorf("route %s is registered but not in pkg/api/openapi.json", r)
		}
	}
	for op := range ops {
		if !slices.Contains(registered, op) {
			t.Errorf("%s is documented in pkg/api/openapi.json but no daemon registers it", op)
		}
	}
	if len(registered) < 15 {
		t.Errorf("only %d routes registered: %v", len(registered), registered)
	}
}

func TestOpenAPI_EveryOperationSaysWhichRoleItNeeds(t *testing.T) {
	doc := openAPIDoc(t)
	schemes, _ := doc["components"].(map[string]any)["securitySchemes"].(map[string]any)
	if b, _ := schemes["bearer"].(map[string]any); b["type"] != "http" || b["scheme"] != "bearer" {
		t.Errorf("components.securitySchemes.bearer = %v, want http bearer", schemes["bearer"])
	}
	for name, op := range operations(t, doc) {
		role, _ := op["x-required-role"].(string)
		method, path, _ := strings.Cut(name, " ")
		switch {
		case role == "none":
			if sec, ok := op["security"].([]any); !ok || len(sec) != 0 {
				t.Errorf("%s: open (x-required-role none) but does not say security: []", name)
			}
			if strings.HasPrefix(path, "/v1/") {
				t.Errorf("%s: a /v1 route cannot be open", name)
			}
		case role == "viewer":
			if method != http.MethodGet {
				t.Errorf("%s: a viewer may only GET", name)
			}
		case role == "admin":
		default:
			t.Errorf("%s: x-required-role = %q, want none, viewer or admin", name, role)
		}
		if role != "none" {
			resp, _ := op["responses"].(map[string]any)
			if resp["401"] == nil || resp["403"] == nil {
				t.Errorf("%s: needs a token but documents no 401 and 403", name)
			}
		}
	}
}

func TestOpenAPI_IsServedOpenlyByTheFrontDoor(t *testing.T) {
	a, err := auth.New(auth.Config{Tokens: []auth.Token{{Token: "0123456789abcdef-admin", Role: auth.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(frontDoor(t, a))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, api.OpenAPI()) {
		t.Fatalf("GET /openapi.json = %d %s (%d bytes)", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
}

// resolve follows a local $ref ("#/components/...").
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for range 8 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = doc
		for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[tok]
		}
		if cur == nil {
			t.Fatalf("$ref %s resolves to nothing", ref)
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// decodeStrict decodes b into a new value of typ, rejecting unknown fields and trailing data.
func decodeStrict(b []byte, typ reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
		return err
	}
	if dec.More() {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func isJSONMedia(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

func TestOpenAPI_EveryExampleDecodesStrictlyIntoItsGoType(t *testing.T) {
	doc := openAPIDoc(t)
	decoded := 0
	check := func(where string, content map[string]any) {
		for mt, v := range content {
			media := v.(map[string]any)
			var examples []any
			if ex, ok := media["example"]; ok {
				examples = append(examples, ex)
			}
			for _, ex := range resolve(t, doc, media["examples"]) {
				examples = append(examples, resolve(t, doc, ex)["value"])
			}
			if len(examples) == 0 {
				continue
			}
			schema := resolve(t, doc, media["schema"])
			name, _ := schema["x-go-type"].(string)
			typ, known := goTypes[name]
			switch {
			case isJSONMedia(mt) && !known && schema["type"] == "object" && name == "":
				t.Errorf("%s %s: an example whose schema has no x-go-type", where, mt)
				continue
			case name != "" && !known:
				t.Errorf("%s %s: x-go-type %q is not a type the test knows", where, mt, name)
				continue
			}
			for i, ex := range examples {
				switch {
				case isJSONMedia(mt) && known:
					b, _ := json.Marshal(ex)
					if err := decodeStrict(b, typ); err != nil {
						t.Errorf("%s %s example %d does not decode into %s: %v\n%s", where, mt, i, name, err, b)
					}
					decoded++
				case mt == "text/event-stream":
					s, _ := ex.(string)
					n := 0
					sc := bufio.NewScanner(strings.NewReader(s))
					for sc.Scan() {
						if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
							if _, err := events.Decode([]byte(data)); err != nil {
								t.Errorf("%s: SSE example data is not a CloudEvent: %v", where, err)
							}
							n++
						}
					}
					if n == 0 {
						t.Errorf("%s: SSE example has no data line", where)
					}
					decoded += n
				}
			}
		}
	}
	for name, op := range operations(t, doc) {
		if rb := resolve(t, doc, op["requestBody"]); rb != nil {
			c, _ := rb["content"].(map[string]any)
			check(name+" request", c)
		}
		resps, _ := op["responses"].(map[string]any)
		for code, r := range resps {
			c, _ := resolve(t, doc, r)["content"].(map[string]any)
			check(name+" "+code, c)
		}
	}
	if decoded < 40 {
		t.Errorf("only %d examples decoded; the walk misses some", decoded)
	}
}

// jsonNames lists the JSON member names of struct t (embedded structs promote theirs).
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Schemas that name a Go type list exactly its fields, so the document cannot drift from
// pkg/api in either direction.
func TestOpenAPI_SchemasListExactlyTheFieldsOfTheirGoTypes(t *testing.T) {
	doc := openAPIDoc(t)
	var walk func(path string, v any)
	checked := 0
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := x["x-go-type"].(string); ok {
				typ, known := goTypes[name]
				props, hasProps := x["properties"].(map[string]any)
				switch {
				case !known:
					t.Errorf("%s: x-go-type %q unknown to the test", path, name)
				case typ.String() != name:
					t.Errorf("test map: %q is %s", name, typ)
				case hasProps && x["additionalProperties"] == false:
					var got []string
					for k := range props {
						got = append(got, k)
					}
					sort.Strings(got)
					if want := jsonNames(typ); !slices.Equal(got, want) {
						t.Errorf("%s (%s): properties %v, Go fields %v", path, name, got, want)
					}
					checked++
				}
			}
			for k, e := range x {
				walk(path+"/"+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("#", doc)
	if checked < 15 {
		t.Errorf("only %d schemas checked against Go types", checked)
	}
}

func TestOpenAPI_EveryAPIPathNamesTheDaemonThatServesIt(t *testing.T) {
	dir := t.TempDir()
	ds, err := dev.Daemons(func() daemon.Base {
		return daemon.Base{NATSURL: "nats://127.0.0.1:1", DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]string{} // "METHOD /pattern" → daemon
	for _, d := range ds {
		r := chi.NewRouter()
		d.Routes(r)
		for _, route := range routes(t, r) {
			served[route] = d.Name()
		}
	}
	owned, err := api.Routes()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range owned {
		key := r.Method + " " + r.Pattern
		seen[key] = true
		if got := served[key]; got != r.Owner {
			t.Errorf("%s: x-owner is %q, but it is served by %q", key, r.Owner, got)
		}
	}
	for key, d := range served {
		if !seen[key] {
			t.Errorf("%s is served by %s but its path has no x-owner: a gateway would not route it", key, d)
		}
	}
	if len(owned) < 15 {
		t.Errorf("only %d owned routes: %v", len(owned), owned)
	}
}
