package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Route is one operation of the OpenAPI document and the daemon that serves it.
type Route struct {
	Method  string // GET, POST, ...
	Pattern string // the document's path, e.g. /v1/clusters/{cluster}/nodepools
	Owner   string // the daemon that serves it (the path's x-owner)
}

// Routes lists every operation of the OpenAPI document whose path names an owning daemon
// (x-owner): what a gateway in front of separately running daemons routes. The routes every
// daemon serves itself (/healthz, /readyz, /metrics, /openapi.json) have no owner and are
// not listed. The result is sorted by pattern, then method.
func Routes() ([]Route, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.json: %w", err)
	}
	var out []Route
	for pattern, item := range doc.Paths {
		raw, ok := item["x-owner"]
		if !ok {
			continue
		}
		var owner string
		if err := json.Unmarshal(raw, &owner); err != nil || owner == "" {
			return nil, fmt.Errorf("api: openapi.json: %s: x-owner must name a daemon", pattern)
		}
		for key := range item {
			switch key {
			case "get", "put", "post", "patch", "delete", "head", "options":
				out = append(out, Route{Method: strings.ToUpper(key), Pattern: pattern, Owner: owner})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pattern != out[j].Pattern {
			return out[i].Pattern < out[j].Pattern
		}
		return out[i].Method < out[j].Method
	})
	return out, nil
}
