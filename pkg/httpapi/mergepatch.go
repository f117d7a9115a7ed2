package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/hostplane/hostplane/pkg/api"
)

// SpecOfPatch returns the spec part of a JSON merge patch (RFC 7386) of a resource: the value
// of "spec" when the patch is object-shaped ({"spec":{...}}, as kubectl sends it), else the
// patch itself. Any of readOnly at the top level is refused, naming the field; example is a
// well-formed patch, quoted in the error for a patch that is not a JSON object.
func SpecOfPatch(patch json.RawMessage, example string, readOnly ...string) (map[string]any, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, api.Errorf(api.CodeInvalid, "a merge patch must be a JSON object, such as %s", example)
	}
	var fe api.FieldErrors
	for _, k := range readOnly {
		if _, ok := doc[k]; ok {
			fe.Add(k, "cannot be patched; only spec can")
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	spec, ok := doc["spec"]
	if !ok {
		return doc, nil
	}
	if len(doc) > 1 {
		// Spec members next to "spec": the caller mixed the two shapes.
		for k := range doc {
			if k != "spec" {
				fe.Add(k, "unknown field; patch either the spec or {\"spec\":{...}}")
			}
		}
		return nil, fe.Err()
	}
	m, ok := spec.(map[string]any)
	if !ok {
		return nil, &api.Error{Code: api.CodeInvalid, Message: "spec must be an object",
			Fields: []api.FieldError{{Field: "spec", Detail: "must be an object"}}}
	}
	return m, nil
}

// ApplySpecPatch merges patch (from SpecOfPatch) into spec (RFC 7386, with
// github.com/evanphx/json-patch) and decodes the result strictly, as DecodeJSON does, so an
// unknown or mistyped field is an Invalid error naming it by its path ("spec.release.versoin").
func ApplySpecPatch[S any](_ context.Context, spec S, patch map[string]any) (S, error) {
	var zero S
	cur, err := json.Marshal(spec)
	if err != nil {
		return zero, err
	}
	p, err := json.Marshal(patch)
	if err != nil {
		return zero, err
	}
	merged, err := jsonpatch.MergePatch(cur, p)
	if err != nil {
		return zero, fmt.Errorf("merge patch: %w", err)
	}
	// Decoded under "spec" so that error paths name the field as the resource has it.
	wrapped, err := json.Marshal(struct {
		Spec json.RawMessage `json:"spec"`
	}{merged})
	if err != nil {
		return zero, err
	}
	var out struct {
		Spec S `json:"spec"`
	}
	if err := decodeStrict(wrapped, &out); err != nil {
		return zero, err
	}
	return out.Spec, nil
}
