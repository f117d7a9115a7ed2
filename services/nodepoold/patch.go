package nodepoold

import (
	"encoding/json"
	"net/http"

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
	return httpapi.SpecOfPatch(raw, `{"spec":{"replicas":3}}`,
		"status", "name", "cluster", "generation", "creationTimestamp", "deletionTimestamp")
}
