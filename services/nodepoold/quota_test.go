package nodepoold

import (
	"net/http"
	"strings"
	"testing"
)

// A pool may not be bigger than api.MaxNodePoolSize, and a cluster's pools, or every
// cluster's, may not ask for more machines than the quotas: a create or a resize past one
// is refused with a 409 that names it; making room lets it through.
func TestNodePoolAPI_MachineQuotasBoundWhatPoolsAskFor(t *testing.T) {
	e := start(t, nil, func(c *Config) { c.MachineQuotaPerCluster, c.MachineQuotaTotal = 5, 8 })
	e.putCluster("demo", "1.34.4")
	e.putCluster("other", "1.34.4")
	size := func(n string) string {
		return `"replicas":` + n + `,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`
	}
	autoscaled := `"autoScaling":{"min":1,"max":3},"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}`
	expect := func(method, path, body string, want int, says string) {
		t.Helper()
		status, b := e.do(method, path, body)
		if status != want || !strings.Contains(string(b), says) {
			t.Fatalf("%s %s %s: %d %s; want %d saying %q", method, path, body, status, b, want, says)
		}
	}
	expect(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("huge", size("1001")), http.StatusBadRequest, "more than the 1000 machines a pool may have")
	expect(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("a", size("2")), http.StatusAccepted, "")
	// An autoscaled pool counts its maximum: 2 + 3 = 5.
	expect(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("b", autoscaled), http.StatusAccepted, "")
	expect(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("c", size("1")), http.StatusConflict, "node pools would ask for 6 machines, more than the 5")
	expect(http.MethodPatch, "/v1/clusters/demo/nodepools/a", `{"spec":{"replicas":3}}`, http.StatusConflict, "would ask for 6 machines")
	// Shrinking is always allowed, and makes room.
	expect(http.MethodPatch, "/v1/clusters/demo/nodepools/a", `{"spec":{"replicas":1}}`, http.StatusOK, "")
	expect(http.MethodPost, "/v1/clusters/demo/nodepools", poolBody("c", size("1")), http.StatusAccepted, "")
	// In all: 5 in demo, so other may ask for 3.
	expect(http.MethodPost, "/v1/clusters/other/nodepools", poolBody("d", size("4")), http.StatusConflict, "every cluster would ask for 9 machines, more than the 8")
	expect(http.MethodPost, "/v1/clusters/other/nodepools", poolBody("d", size("3")), http.StatusAccepted, "")
}
