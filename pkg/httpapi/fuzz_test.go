package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

// Request bodies of the API's create and patch endpoints, valid and not, from the daemons'
// tests and docs: the seed corpus of the fuzz targets below.
var (
	clusterBodies = []string{
		`{"name":"demo","spec":{"release":{"version":"1.34.4"}}}`,
		`{"name":"prod","spec":{"release":{"version":"1.33.7"},"platform":{"type":"none"},"controllerAvailabilityPolicy":"HighlyAvailable",` +
			`"networking":{"serviceCIDR":"10.96.0.0/16","podCIDR":"10.132.0.0/14"},"pki":{"caLifetime":"8760h","leafLifetime":"720h"}}}`,
		`{"name":"v6","spec":{"release":{"version":"1.34.4"},"networking":{"serviceCIDR":"fd00::/108","podCIDR":"fd01::/48"}}}`,
		`{"Name":"demo","SPEC":{"Release":{"Version":"1.34.4"}}}`,
		`{"name":"demo","spec":{"release":{"version":"1.34.4"}},"status":{"kubeconfigAvailable":true}}`,
		`{"name":"demo","spec":{"release":{"versoin":"1.34.4"}}}`,
		`{"name":"demo","spec":{"networking":{"serviceCIDR":"10.96.0.1/16"}}}`,
		`{"name":"demo","spec":{"pki":{"caLifetime":"-1h"}}}`,
		`{"name":"demo"} {"name":"again"}`, `{"name":`, `[]`, `null`, `"demo"`, `{}`, ``,
	}
	nodePoolBodies = []string{
		`{"name":"workers","spec":{"replicas":2,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}}}`,
		`{"name":"gpu","spec":{"autoScaling":{"min":1,"max":5},"release":{"version":"v1.33.7"},"management":{"upgradeType":"InPlace",` +
			`"inPlace":{"maxUnavailable":2},"autoRepair":true,"autoRepairPolicy":{"nodeNotReadyTimeout":"8m","maxUnhealthy":2}}}}`,
		`{"name":"workers","spec":{"replicas":1,"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace","replace":` +
			`{"strategy":"RollingUpdate","rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}},"nodeLabels":{"example.com/role":"gpu"},` +
			`"taints":[{"key":"gpu","value":"true","effect":"NoSchedule"}],"config":[{"name":"motd","content":"{\"ignition\":{\"version\":\"3.4.0\"}}"}],` +
			`"nodeDrainTimeout":"5m","nodeVolumeDetachTimeout":"0s"}}`,
		`{"name":"workers","spec":{"replicas":1,"autoScaling":{"min":1,"max":2},"release":{"version":"1.34.4"},"management":{"upgradeType":"Replace"}}}`,
		`{"name":"workers","spec":{"replicas":"three"}}`, `{"name":"workers","spec":{"replicas":1.5}}`,
		`{"name":"workers","spec":{"taints":{}}}`, `{"name":"workers","spec":{"taints":[{"key":"a","foo":1}]}}`,
		`{"name":"workers","spec":{"nodeLabels":{"hostplane.dev/x":"y"}}}`, `{"spec":{"replicas":2147483648}}`,
	}
	patchBodies = []string{
		`{"release":{"version":"1.34.4"}}`, `{"spec":{"release":{"version":"1.34.4"}}}`, `{"spec":{"replicas":3}}`,
		`{"replicas":null,"nodeLabels":{"a":null,"b":"2"}}`, `{"taints":[]}`, `{"config":[{"name":"x","content":"y"}]}`,
		`{"management":{"replace":{"rollingUpdate":{"maxSurge":0}}}}`, `{"spec":{"replicas":3},"replicas":2}`,
		`{"status":{}}`, `{"name":"other"}`, `{"spec":1}`, `{"spec":null}`, `{"release":{"versoin":"1.34.4"}}`,
		`{"replicas":"three"}`, `{"replicas":1e400}`, `{"replicas":-0}`, `{"Release":{"Version":"1.33.7"}}`,
		`[]`, `null`, `1`, `{`, ``,
	}
)

// decodeBody runs body through DecodeJSON as the API's handlers receive it.
func decodeBody(body []byte, v any) error {
	r := httptest.NewRequest(http.MethodPost, "/v1/clusters", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return DecodeJSON(r, v)
}

// wantCallerError fails unless err is one the caller caused: an *api.Error with a 4xx code,
// never an internal error (a 500 for a body the client sent).
func wantCallerError(t *testing.T, what string, input []byte, err error) {
	t.Helper()
	switch code := api.ErrorCode(err); code {
	case api.CodeInvalid, api.CodeTooLarge:
	default:
		t.Fatalf("%s of %q: %v (code %s), want an Invalid api.Error", what, input, err, code)
	}
}

// roundTrip encodes v as it is stored, decodes the encoding strictly into a fresh T and
// checks that it encodes to the same bytes: the stored object reads back as it was accepted.
func roundTrip[T any](t *testing.T, body []byte, v *T) *T {
	t.Helper()
	stored, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("body %q: encode the accepted object: %v", body, err)
	}
	var again T
	if err := decodeBody(stored, &again); err != nil {
		t.Fatalf("body %q: the accepted object %s does not decode again: %v", body, stored, err)
	}
	if b, _ := json.Marshal(&again); !bytes.Equal(b, stored) {
		t.Fatalf("body %q: the accepted object %s reads back as %s", body, stored, b)
	}
	return &again
}

// FuzzDecodeCluster: POST /v1/clusters's body through DecodeJSON, defaults and
// api.ValidateCluster never panics, fails only with an Invalid error, and a valid cluster
// re-encodes and re-decodes to the same cluster, still valid.
func FuzzDecodeCluster(f *testing.F) {
	for _, s := range clusterBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.Cluster
		if err := decodeBody(body, &in); err != nil {
			wantCallerError(t, "DecodeJSON", body, err)
			return
		}
		c := api.Cluster{Spec: in.Spec} // what clusterd keeps of a create
		c.Name = in.Name
		c.Spec.Default()
		_ = api.ValidateClusterUpdate(&c.Spec, &in.Spec, api.ReleaseCatalogue{})
		if err := api.ValidateCluster(&c, api.ReleaseCatalogue{}); err != nil {
			wantCallerError(t, "ValidateCluster", body, err)
			return
		}
		again := roundTrip(t, body, &c)
		if err := api.ValidateCluster(again, api.ReleaseCatalogue{}); err != nil {
			t.Fatalf("body %q: valid, but not once stored and read back: %v", body, err)
		}
	})
}

// poolCluster is the cluster the fuzzed node pools belong to.
var poolCluster = api.Cluster{Spec: api.ClusterSpec{
	Release: api.Release{Version: "1.34.4"}, Platform: api.Platform{Type: api.PlatformLocal},
}}

// FuzzDecodeNodePool: POST /v1/clusters/{c}/nodepools's body through DecodeJSON, defaults
// and api.ValidateNodePool never panics, fails only with an Invalid error, and a valid pool
// re-encodes and re-decodes to the same pool, still valid.
func FuzzDecodeNodePool(f *testing.F) {
	for _, s := range nodePoolBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.NodePool
		if err := decodeBody(body, &in); err != nil {
			wantCallerError(t, "DecodeJSON", body, err)
			return
		}
		np := api.NodePool{Cluster: "demo", Spec: in.Spec} // what nodepoold keeps of a create
		np.Name = in.Name
		np.Spec.Default(&poolCluster.Spec)
		_ = np.Spec.DesiredReplicas()
		_ = api.ValidateNodePoolUpdate(&np.Spec, &in.Spec, &poolCluster, api.NodePoolChecks{})
		if err := api.ValidateNodePool(&np, &poolCluster, api.NodePoolChecks{}); err != nil {
			wantCallerError(t, "ValidateNodePool", body, err)
			return
		}
		again := roundTrip(t, body, &np)
		if err := api.ValidateNodePool(again, &poolCluster, api.NodePoolChecks{}); err != nil {
			t.Fatalf("body %q: valid, but not once stored and read back: %v", body, err)
		}
	})
}

// FuzzMergePatch: a PATCH body through SpecOfPatch and ApplySpecPatch, onto a cluster's and
// a node pool's spec, never panics; it is either an Invalid error or a spec that encodes as a
// JSON object, and applying the same patch again changes nothing (RFC 7386 is idempotent).
func FuzzMergePatch(f *testing.F) {
	for _, s := range patchBodies {
		f.Add([]byte(s))
	}
	replicas := int32(2)
	cluster := poolCluster.Spec
	cluster.Default()
	pool := api.NodePoolSpec{Replicas: &replicas, Release: api.Release{Version: "1.34.4"},
		Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace},
		NodeLabels: map[string]string{"a": "1"}, Taints: []api.Taint{{Key: "gpu", Effect: "NoSchedule"}}}
	pool.Default(&cluster)
	f.Fuzz(func(t *testing.T, patch []byte) {
		checkMergePatch(t, patch, cluster, "status", "name", "generation", "creationTimestamp", "deletionTimestamp")
		checkMergePatch(t, patch, pool, "status", "name", "cluster", "generation", "creationTimestamp", "deletionTimestamp")
	})
}

func checkMergePatch[S any](t *testing.T, patch []byte, spec S, readOnly ...string) {
	t.Helper()
	m, err := SpecOfPatch(patch, `{"spec":{}}`, readOnly...)
	if err != nil {
		wantCallerError(t, "SpecOfPatch", patch, err)
		return
	}
	ctx := context.Background()
	out, err := ApplySpecPatch(ctx, spec, m)
	if err != nil {
		wantCallerError(t, "ApplySpecPatch", patch, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil || !json.Valid(b) || b[0] != '{' {
		t.Fatalf("patch %q: result %s is not a JSON object (%v)", patch, b, err)
	}
	twice, err := ApplySpecPatch(ctx, out, m)
	if err != nil {
		t.Fatalf("patch %q: applies once but not twice: %v", patch, err)
	}
	if b2, _ := json.Marshal(twice); !bytes.Equal(b, b2) {
		t.Fatalf("patch %q: once gives %s, twice %s", patch, b, b2)
	}
}
