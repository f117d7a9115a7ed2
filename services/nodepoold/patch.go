package nodepoold

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// decodeSpecPatch reads a merge patch of a pool's spec: the value of "spec" when the patch
// is object-shaped ({"spec":{...}}, as kubectl sends it), else the patch itself. Name, cluster
// and status cannot be patched.
func decodeSpecPatch(r *http.Request) (map[string]any, error) {
	var raw json.RawMessage
	if err := httpapi.DecodeJSON(r, &raw); err != nil {
		return nil, err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, api.Errorf(api.CodeInvalid, "a merge patch must be a JSON object, such as {\"spec\":{\"replicas\":3}}")
	}
	var fe api.FieldErrors
	for _, k := range []string{"status", "name", "cluster", "generation", "creationTimestamp", "deletionTimestamp"} {
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

// applySpecPatch merges patch into spec (RFC 7386) and decodes the result strictly, so an
// unknown or mistyped field is an Invalid error naming it by its path ("spec.replicsa").
func applySpecPatch(ctx context.Context, spec api.NodePoolSpec, patch map[string]any) (api.NodePoolSpec, error) {
	cur, err := json.Marshal(spec)
	if err != nil {
		return api.NodePoolSpec{}, err
	}
	var target any
	dec := json.NewDecoder(bytes.NewReader(cur))
	dec.UseNumber()
	if err := dec.Decode(&target); err != nil {
		return api.NodePoolSpec{}, err
	}
	merged, err := json.Marshal(map[string]any{"spec": mergePatch(target, patch)})
	if err != nil {
		return api.NodePoolSpec{}, err
	}
	// httpapi.DecodeJSON is the one strict decoder that names fields by their JSON path.
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, "/", bytes.NewReader(merged))
	if err != nil {
		return api.NodePoolSpec{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var out struct {
		Spec api.NodePoolSpec `json:"spec"`
	}
	if err := httpapi.DecodeJSON(req, &out); err != nil {
		return api.NodePoolSpec{}, err
	}
	return out.Spec, nil
}

// mergePatch applies an RFC 7386 merge patch to target and returns the result.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}
