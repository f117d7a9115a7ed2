package httpapi

import (
	"bytes"
	"context"
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

	sigsjson "sigs.k8s.io/json"

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
		if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &api.Error{Code: api.CodeTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit), Err: err}
		}
		return &api.Error{Code: api.CodeInvalid, Message: "request body could not be read", Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errEmptyBody
	}
	return decodeStrict(data, v)
}

// decodeStrict decodes data, which must be exactly one JSON value, into v, rejecting unknown
// fields, with DecodeJSON's errors.
func decodeStrict(data []byte, v any) error {
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
		field := unknownFieldPath(data, v, key)
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

// unknownFieldPath returns the JSON path ("spec.management.foo", "spec.taints[1].foo") of the
// member named key that encoding/json rejected: encoding/json reports only the key, so the body
// is decoded again into a fresh value of v's type with sigs.k8s.io/json, whose strict errors
// carry the path. encoding/json has decided that the member is unknown (it matches names
// case-insensitively, sigs.k8s.io/json does not), so of the strict errors the first that ends
// in key is the one. Without one (the member sits below a member whose name matched only
// case-insensitively, or the body has a type error too) it returns key itself.
func unknownFieldPath(data []byte, v any, key string) string {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return key
	}
	strict, err := sigsjson.UnmarshalStrict(data, reflect.New(t.Elem()).Interface(), sigsjson.DisallowUnknownFields)
	if err != nil {
		return key
	}
	for _, e := range strict {
		var fe sigsjson.FieldError
		if !errors.As(e, &fe) {
			continue
		}
		if path := fe.FieldPath(); path == key || strings.HasSuffix(path, "."+key) {
			return path
		}
	}
	return key
}
