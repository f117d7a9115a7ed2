package api_test

import (
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestPartKeys_RoundTripAndStayWithinTheirCluster(t *testing.T) {
	key := api.ComponentKey("demo", api.ComponentKubeAPIServer)
	if c, part, ok := api.SplitPartKey(key); !ok || c != "demo" || part != api.ComponentKubeAPIServer {
		t.Fatalf("SplitPartKey(%q) = %q, %q, %v", key, c, part, ok)
	}
	for _, bad := range []string{"demo", ".etcd", "demo.", ""} {
		if _, _, ok := api.SplitPartKey(bad); ok {
			t.Errorf("SplitPartKey(%q) ok, want not a part key", bad)
		}
	}
	if got := api.ClusterPartsFilter("demo"); got != "demo.*" {
		t.Fatalf("ClusterPartsFilter = %q", got)
	}
}
