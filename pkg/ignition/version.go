package ignition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_1"
	"github.com/coreos/ignition/v2/config/v3_2"
	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_5"
)

// A machine's Ignition reads configs up to the spec version it was built with (Debian
// bookworm's Ignition 2.14 reads 3.3.0 at most; Fedora CoreOS's reads 3.5.0) and says which
// in its Accept header. What hostplane renders at Version is served at an older version when
// that loses nothing (Downgrade); the stub is rendered at StubVersion, the oldest version with
// everything a stub needs, so every Ignition v2 reads it.

// StubVersion is the spec version of the stub (userdata): 3.1.0 added the HTTP headers the
// stub's bearer token travels in.
const StubVersion = "3.1.0"

// lowerParsers parse a config of exactly one version older than Version into that version's
// types (which then marshal back to its JSON).
var lowerParsers = map[string]func([]byte) (any, error){
	"3.4.0": func(b []byte) (any, error) { c, _, err := v3_4.Parse(b); return c, err },
	"3.3.0": func(b []byte) (any, error) { c, _, err := v3_3.Parse(b); return c, err },
	"3.2.0": func(b []byte) (any, error) { c, _, err := v3_2.Parse(b); return c, err },
	"3.1.0": func(b []byte) (any, error) { c, _, err := v3_1.Parse(b); return c, err },
}

// ServedVersions are the spec versions a payload can be served at, newest first.
func ServedVersions() []string {
	out := []string{Version}
	for v := range lowerParsers {
		out = append(out, v)
	}
	slices.SortFunc(out[1:], func(a, b string) int { return strings.Compare(b, a) })
	return out
}

// AcceptedVersions returns the spec versions a client's Accept header names for MediaType
// ("application/vnd.coreos.ignition+json;version=3.3.0"), newest first, ignoring entries
// with q=0. A header that names none (absent, "*/*", or the media type without a version)
// accepts Version only: such a client reads what it is given.
func AcceptedVersions(accept string) []string {
	var out []string
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != MediaType || params["q"] == "0" {
			continue
		}
		if v := params["version"]; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return []string{Version}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(b, a) })
	return out
}

// Negotiate returns rendered (a config of Version) at the newest version accept names that
// expresses it fully, and that version. ErrNotAcceptable says no accepted version can.
func Negotiate(rendered []byte, accept string) ([]byte, string, error) {
	accepted := AcceptedVersions(accept)
	for _, v := range accepted {
		if b, err := Downgrade(rendered, v); err == nil {
			return b, v, nil
		}
	}
	return nil, "", fmt.Errorf("%w: the machine reads spec %s; this config needs %s", ErrNotAcceptable, strings.Join(accepted, ", "), Version)
}

// Downgrade returns rendered (a valid config of Version) as a config of spec version to, when
// that version expresses all of it: the config is parsed as version to, translated back to
// Version, and must come back the same. ErrNotAcceptable says it would lose something (a
// field that version does not have) or that hostplane does not serve that version.
func Downgrade(rendered []byte, to string) ([]byte, error) {
	if to == Version {
		return rendered, nil
	}
	parse, ok := lowerParsers[to]
	if !ok {
		return nil, fmt.Errorf("%w: spec version %q is not one hostplane serves (%s)", ErrNotAcceptable, to, strings.Join(ServedVersions(), ", "))
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(rendered, &doc); err != nil {
		return nil, err
	}
	var ign map[string]any
	if err := json.Unmarshal(doc["ignition"], &ign); err != nil {
		return nil, err
	}
	ign["version"] = to
	var err error
	if doc["ignition"], err = json.Marshal(ign); err != nil {
		return nil, err
	}
	relabelled, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	cfg, err := parse(relabelled)
	if err != nil {
		return nil, fmt.Errorf("%w: as spec %s: %v", ErrNotAcceptable, to, err)
	}
	lower, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	back, _, err := v3_5.ParseCompatibleVersion(lower)
	if err != nil {
		return nil, fmt.Errorf("%w: spec %s does not translate back: %v", ErrNotAcceptable, to, err)
	}
	orig, _, err := v3_5.Parse(rendered)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	a, _ := json.Marshal(back)
	b, _ := json.Marshal(orig)
	if !bytes.Equal(a, b) {
		return nil, fmt.Errorf("%w: spec %s cannot express every field of this config", ErrNotAcceptable, to)
	}
	return lower, nil
}
