package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
)

type testTaint struct {
	Key    string `json:"key"`
	Effect string `json:"effect"`
}

type testMeta struct {
	Labels map[string]string `json:"labels,omitempty"`
}

type testSpec struct {
	Replicas int `json:"replicas"`
	Release  struct {
		Version string `json:"version"`
	} `json:"release"`
	Taints  []testTaint          `json:"taints,omitempty"`
	Configs map[string]testTaint `json:"configs,omitempty"`
	Hidden  string               `json:"-"`
}

type testObject struct {
	testMeta
	Name string   `json:"name"`
	Spec testSpec `json:"spec"`
}

func decodeEnv(t *testing.T, limit int64) *testEnv {
	return newTestEnv(t, Config{MaxBodyBytes: limit}, func(r chi.Router) {
		r.Post("/v1/objects", Handle(func(w http.ResponseWriter, r *http.Request) error {
			var obj testObject
			if err := DecodeJSON(r, &obj); err != nil {
				return err
			}
			WriteJSON(w, http.StatusCreated, obj)
			return nil
		}))
	})
}

// onlyReader hides the length of a body so the client sends it chunked.
type onlyReader struct{ io.Reader }

func TestDecodeJSON_OverHTTP(t *testing.T) {
	const limit = 256
	env := decodeEnv(t, limit)
	big := `{"name":"` + strings.Repeat("x", limit) + `"}`

	tests := []struct {
		name        string
		contentType string // "-" sends none
		body        io.Reader
		wantStatus  int
		wantCode    api.Code
		wantDetail  string // substring of detail
		wantField   string // a field error naming this field
	}{
		{name: "valid", contentType: "application/json", body: strings.NewReader(`{"name":"a","spec":{"replicas":2}}`), wantStatus: 201},
		{name: "valid with charset", contentType: "application/json; charset=utf-8", body: strings.NewReader(`{"name":"a"}`), wantStatus: 201},
		{name: "valid merge patch", contentType: "application/merge-patch+json", body: strings.NewReader(`{"name":"a"}`), wantStatus: 201},
		{name: "valid without content type", contentType: "-", body: strings.NewReader(`{"name":"a"}`), wantStatus: 201},
		{name: "promoted field of embedded struct", contentType: "application/json", body: strings.NewReader(`{"name":"a","labels":{"x":"y"}}`), wantStatus: 201},
		{name: "case-insensitive member name", contentType: "application/json", body: strings.NewReader(`{"Name":"a","SPEC":{"Replicas":1}}`), wantStatus: 201},

		{name: "wrong content type", contentType: "text/plain", body: strings.NewReader(`{"name":"a"}`),
			wantStatus: 415, wantCode: api.CodeUnsupported, wantDetail: `"text/plain"`},
		{name: "malformed content type", contentType: "application/json;;=", body: strings.NewReader(`{}`),
			wantStatus: 415, wantCode: api.CodeUnsupported},
		{name: "empty body", contentType: "application/json", body: strings.NewReader(""),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "request body is empty"},
		{name: "blank body", contentType: "application/json", body: strings.NewReader(" \n\t"),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "request body is empty"},
		{name: "unknown top-level field", contentType: "application/json", body: strings.NewReader(`{"name":"a","foo":1}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: `unknown field "foo"`, wantField: "foo"},
		{name: "unknown nested field", contentType: "application/json", body: strings.NewReader(`{"name":"a","spec":{"replicas":1,"foo":true}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: `unknown field "spec.foo"`, wantField: "spec.foo"},
		{name: "unknown field in array element", contentType: "application/json",
			body:       strings.NewReader(`{"spec":{"taints":[{"key":"a"},{"key":"b","value":"c"}]}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantField: "spec.taints[1].value"},
		{name: "unknown field in map value", contentType: "application/json",
			body:       strings.NewReader(`{"spec":{"configs":{"one":{"key":"a","bogus":1}}}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantField: "spec.configs.one.bogus"},
		{name: "unknown field beside case-insensitive member names", contentType: "application/json",
			body:       strings.NewReader(`{"Name":"a","spec":{"Replicas":1,"taints":[{"Key":"a","foo":1}]}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: `unknown field "spec.taints[0].foo"`, wantField: "spec.taints[0].foo"},
		{name: "unknown field in promoted embedded struct", contentType: "application/json", body: strings.NewReader(`{"labels":{"x":"y"},"spec":{},"bogus":{"spec":1}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantField: "bogus"},
		{name: "field hidden by json:\"-\" is unknown", contentType: "application/json", body: strings.NewReader(`{"spec":{"Hidden":"x"}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantField: "spec.Hidden"},
		{name: "wrong type", contentType: "application/json", body: strings.NewReader(`{"spec":{"replicas":"three"}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "an integer", wantField: "spec.replicas"},
		{name: "fraction for an integer", contentType: "application/json", body: strings.NewReader(`{"spec":{"replicas":1.5}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "an integer", wantField: "spec.replicas"},
		{name: "wrong type nested", contentType: "application/json", body: strings.NewReader(`{"spec":{"release":{"version":134}}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "a string", wantField: "spec.release.version"},
		{name: "object where an array belongs", contentType: "application/json", body: strings.NewReader(`{"spec":{"taints":{}}}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "an array", wantField: "spec.taints"},
		{name: "array for the body", contentType: "application/json", body: strings.NewReader(`[1,2]`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "must be an object"},
		{name: "syntax error", contentType: "application/json", body: strings.NewReader(`{"name": }`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "byte offset 9"},
		{name: "truncated", contentType: "application/json", body: strings.NewReader(`{"name":"a"`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "ends early"},
		{name: "second value after the object", contentType: "application/json", body: strings.NewReader(`{"name":"a"} {"name":"b"}`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "after the JSON value at byte offset 13"},
		{name: "garbage after the object", contentType: "application/json", body: strings.NewReader(`{"name":"a"}x`),
			wantStatus: 400, wantCode: api.CodeInvalid, wantDetail: "after the JSON value"},
		{name: "too large with Content-Length", contentType: "application/json", body: strings.NewReader(big),
			wantStatus: 413, wantCode: api.CodeTooLarge, wantDetail: "larger than 256 bytes"},
		{name: "too large chunked", contentType: "application/json", body: onlyReader{strings.NewReader(big)},
			wantStatus: 413, wantCode: api.CodeTooLarge, wantDetail: "larger than 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := map[string]string{"Content-Type": tt.contentType}
			if tt.contentType == "-" {
				header = nil
			}
			res := env.request(t, http.MethodPost, "/v1/objects", tt.body, header)
			if tt.wantCode == "" {
				if res.status != tt.wantStatus {
					t.Fatalf("status = %d, want %d: %s", res.status, tt.wantStatus, res.body)
				}
				return
			}
			p := res.problem(t, tt.wantStatus)
			if p.Code() != tt.wantCode {
				t.Errorf("code = %q, want %q", p.Code(), tt.wantCode)
			}
			if p.Instance != "/v1/objects" {
				t.Errorf("instance = %q", p.Instance)
			}
			if !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tt.wantDetail)
			}
			if tt.wantField != "" {
				found := false
				for _, f := range p.Errors {
					found = found || f.Field == tt.wantField
				}
				if !found {
					t.Errorf("field errors %+v do not name %q", p.Errors, tt.wantField)
				}
			}
		})
	}
}

func TestDecodeJSON_AlwaysReturnsAPIError(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		target any
		want   api.Code
	}{
		{name: "syntax", body: `{`, target: &testObject{}, want: api.CodeInvalid},
		{name: "non-pointer target is a bug", body: `{}`, target: testObject{}, want: api.CodeInternal},
		{name: "custom unmarshaler rejects", body: `{"at":"yesterday"}`, target: &struct {
			At jsonTime `json:"at"`
		}{}, want: api.CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewBufferString(tt.body))
			err := DecodeJSON(req, tt.target)
			ae, ok := err.(*api.Error)
			if !ok {
				t.Fatalf("error %T %v is not *api.Error", err, err)
			}
			if ae.Code != tt.want {
				t.Errorf("code = %q, want %q (%v)", ae.Code, tt.want, err)
			}
		})
	}
}

type jsonTime struct{}

func (*jsonTime) UnmarshalJSON([]byte) error { return errBadTime }

var errBadTime = json.Unmarshal([]byte(`x`), new(any))

func TestDecodeJSON_DefaultLimitOutsideRouter(t *testing.T) {
	body := `{"name":"` + strings.Repeat("x", int(DefaultMaxBodyBytes)) + `"}`
	req, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	if code := api.ErrorCode(DecodeJSON(req, &testObject{})); code != api.CodeTooLarge {
		t.Fatalf("code = %q, want %q", code, api.CodeTooLarge)
	}
}
