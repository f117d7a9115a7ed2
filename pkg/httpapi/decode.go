package httpapi

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
)

// DefaultMaxBodyBytes limits request bodies when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes int64 = 1 << 20

// acceptedJSONTypes are the request media types DecodeJSON reads. Merge patches are JSON too.
var acceptedJSONTypes = []string{"application/json", "application/merge-patch+json"}

type bodyLimitKey struct{}

// maxBodyBytes returns the body limit the router put in ctx, or the default.
func maxBodyBytes(ctx context.Context) int64 {
	if n, ok := ctx.Value(bodyLimitKey{}).(int64); ok && n > 0 {
		return n
	}
	return DefaultMaxBodyBytes
}

// DecodeJSON reads r's body, which must be exactly one JSON value, into v. It is strict: the
// Content-Type must be application/json (or absent), unknown fields are rejected and the body
// may not exceed the router's MaxBodyBytes. Every failure is an *api.Error that names the
// offending field where there is one: CodeUnsupported for another media type, CodeTooLarge
// for an oversized body, CodeInvalid for everything else the caller got wrong.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !slices.Contains(acceptedJSONTypes, mt) {
			return api.Errorf(api.CodeUnsupported, "Content-Type %q is not supported; send application/json", ct)
		}
	}
	if r.Body == nil {
		return errEmptyBody
	}
	limit := maxBodyBytes(r.Context())
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &api.Error{Code: api.CodeTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit), Err: err}
		}
		return &api.Error{Code: api.CodeInvalid, Message: "request body could not be read", Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errEmptyBody
	}

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, data, v)
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return api.Errorf(api.CodeInvalid, "request body has data after the JSON value at byte offset %d", int64(len(data)-len(rest)))
	}
	return nil
}

var errEmptyBody = api.Errorf(api.CodeInvalid, "request body is empty")

// decodeError turns an encoding/json error into an *api.Error naming the field.
func decodeError(err error, data []byte, v any) error {
	var (
		syntax    *json.SyntaxError
		typ       *json.UnmarshalTypeError
		badTarget *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &syntax):
		// Offset counts the bytes read, the offending one included; report its position.
		return &api.Error{Code: api.CodeInvalid, Err: err,
			Message: fmt.Sprintf("request body is not valid JSON at byte offset %d: %s", max(syntax.Offset-1, 0), syntax.Error())}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &api.Error{Code: api.CodeInvalid, Err: err,
			Message: fmt.Sprintf("request body is not valid JSON: it ends early at byte offset %d", len(data))}
	case errors.As(err, &typ):
		want := jsonKind(typ.Type)
		if typ.Field == "" {
			return &api.Error{Code: api.CodeInvalid, Err: err,
				Message: fmt.Sprintf("request body must be %s, not %s", want, typ.Value)}
		}
		return &api.Error{Code: api.CodeInvalid, Err: err,
			Message: fmt.Sprintf("field %q must be %s, not %s", typ.Field, want, typ.Value),
			Fields:  []api.FieldError{{Field: typ.Field, Detail: fmt.Sprintf("must be %s, not %s", want, typ.Value)}}}
	case errors.As(err, &badTarget):
		return &api.Error{Code: api.CodeInternal, Err: err}
	}
	if key, ok := unknownFieldKey(err); ok {
		field := findUnknownField(data, reflect.TypeOf(v), key)
		return &api.Error{Code: api.CodeInvalid, Err: err,
			Message: fmt.Sprintf("unknown field %q", field),
			Fields:  []api.FieldError{{Field: field, Detail: "unknown field"}}}
	}
	// An UnmarshalJSON or UnmarshalText method of the target rejected the value.
	return &api.Error{Code: api.CodeInvalid, Err: err,
		Message: "request body is invalid: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// unknownFieldKey extracts the key from encoding/json's `json: unknown field "key"` error,
// which has no type of its own.
func unknownFieldKey(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	key, qerr := strconv.Unquote(rest)
	if qerr != nil {
		return rest, true
	}
	return key, true
}

// jsonKind names the JSON form of a Go type for error messages.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// findUnknownField returns the JSON path ("spec.management.foo", "spec.taints[1].foo") of the
// member named key that t does not accept. encoding/json reports only the key, so the body is
// walked again against t. Without a better answer it returns key itself.
func findUnknownField(data []byte, t reflect.Type, key string) string {
	var doc any
	if t == nil || json.Unmarshal(data, &doc) != nil {
		return key
	}
	var first, match string
	walkUnknown(doc, t, "", func(path, k string) bool {
		if first == "" {
			first = path
		}
		if k == key {
			match = path
			return true
		}
		return false
	})
	switch {
	case match != "":
		return match
	case first != "":
		return first
	}
	return key
}

// walkUnknown calls found for each member of doc that t has no field for, in a stable order,
// and stops when found returns true.
func walkUnknown(doc any, t reflect.Type, path string, found func(path, key string) bool) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return false // decodes itself: its members are its business
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := joinPath(path, k)
			ft, ok := lookupField(fields, k)
			if !ok {
				if found(p, k) {
					return true
				}
				continue
			}
			if walkUnknown(obj[k], ft, p, found) {
				return true
			}
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if walkUnknown(obj[k], t.Elem(), joinPath(path, k), found) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return false
		}
		for i, e := range arr {
			if walkUnknown(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", found) {
				return true
			}
		}
	}
	return false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields lists the JSON member names of struct t and their types, following the rules of
// encoding/json: tags rename or hide fields, untagged embedded structs promote their fields.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type)
	var collect func(t reflect.Type, depth int)
	collect = func(t reflect.Type, depth int) {
		if depth > 10 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				et := f.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					collect(et, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := fields[name]; !dup || depth == 0 {
				fields[name] = f.Type
			}
		}
	}
	collect(t, 0)
	return fields
}

// lookupField matches key like encoding/json: exactly, else case-insensitively.
func lookupField(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}
