package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// ParseVersion parses a release version: major.minor.patch ("1.34.4"), optionally preceded by
// "v", without a pre-release or build suffix.
func ParseVersion(s string) (*version.Version, error) {
	v, err := version.ParseSemantic(strings.TrimSpace(s))
	if err != nil || v.PreRelease() != "" || v.BuildMetadata() != "" {
		return nil, fmt.Errorf("want major.minor.patch, got %q", s)
	}
	return v, nil
}
