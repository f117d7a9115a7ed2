package api_test

import (
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestParseVersion_AcceptsOnlyMajorMinorPatch(t *testing.T) {
	for _, s := range []string{"1.2", "1.2.3.4", "1.x.3", "01.2.3", "1.02.3", "-1.2.3", "1..3", "", "v", "1.34.4-rc.1", "1.34.4+build", "vv1.2.3"} {
		if _, err := api.ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) succeeded, want an error", s)
		}
	}
	for _, s := range []string{"1.34.4", "v1.34.4", " v1.34.4\n"} {
		v, err := api.ParseVersion(s)
		if err != nil || v.Major() != 1 || v.Minor() != 34 || v.Patch() != 4 || v.String() != "1.34.4" {
			t.Errorf("ParseVersion(%q) = %v, %v", s, v, err)
		}
	}
}
