package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	hpclient "github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/test/apicheck"
)

// Every route the document lists, called on a running stack the way clients call it (and the
// way they get it wrong), answers as the document says: the client's transport checks each
// request and answer (test/apicheck), and this test says which status it expects. It is the
// walk over the routes the other tests do not take: the open endpoints, the event stream, the
// audit log, component logs, PKI, infrastructure, instance types, and each error status.
func TestAPI_EveryRouteAnswersAsTheDocumentSays(t *testing.T) {
	s, c := stack(t)
	expect := func(method, path, body string, want int) []byte {
		t.Helper()
		code, b := c.do(method, path, body, nil)
		if code != want {
			t.Errorf("%s %s: %d, want %d: %s", method, path, code, want, b)
		}
		return b
	}

	// Open endpoints, and one a token is required for.
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics"} {
		expect("GET", p, "", http.StatusOK)
	}
	anonymous := newClient(t, s.URL(), "", "")
	if code, b := anonymous.do("GET", "/v1/clusters", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/clusters without a token: %d %s, want 401", code, b)
	}

	// A cluster that is not there, on each of its routes.
	for _, p := range []string{"", "/kubeconfig", "/components", "/pki", "/infra", "/nodepools", "/nodepools/np", "/machines", "/audit"} {
		expect("GET", "/v1/clusters/nope"+p, "", http.StatusNotFound)
	}
	expect("PATCH", "/v1/clusters/nope", `{"spec":{"release":{"version":"`+newRelease+`"}}}`, http.StatusNotFound)
	expect("DELETE", "/v1/clusters/nope", "", http.StatusNotFound)

	// A running cluster: every read.
	expect("POST", "/v1/clusters", `{"name":"walk","spec":{"release":{"version":"`+newRelease+`"}}}`, http.StatusAccepted)
	since := time.Now().Add(-time.Minute)
	c.waitCondition("walk", api.ConditionAvailable, api.ConditionTrue, available)
	for _, p := range []string{"/v1/clusters", "/v1/clusters/walk", "/v1/clusters/walk/kubeconfig",
		"/v1/clusters/walk/pki", "/v1/clusters/walk/infra", "/v1/clusters/walk/nodepools",
		"/v1/clusters/walk/machines", "/v1/clusters/walk/audit?limit=5&verb=get",
		"/v1/releases", "/v1/platforms/local/instancetypes"} {
		expect("GET", p, "", http.StatusOK)
	}
	var comps api.ComponentList
	if code, b := c.do("GET", "/v1/clusters/walk/components", "", &comps); code != http.StatusOK || len(comps.Items) == 0 {
		t.Fatalf("components: %d %s", code, b)
	}
	expect("GET", "/v1/clusters/walk/components/"+comps.Items[0].Name+"/logs?tail=5", "", http.StatusOK)
	expect("GET", "/v1/clusters/walk/components/no-such-component/logs", "", http.StatusNotFound)
	expect("GET", "/v1/clusters/walk/audit?limit=many", "", http.StatusBadRequest)

	// The event stream, replayed from before the create: its answer streams through the
	// checking transport event by event.
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := c.api.Events(sctx, "walk", hpclient.StreamOptions{Since: since})
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	ev, err := stream.Next()
	stream.Close()
	if err != nil || ev.Event.Type == "" {
		t.Errorf("first event of the stream: %+v, %v", ev, err)
	}
	expect("GET", "/v1/clusters/walk/events?since=yesterday", "", http.StatusBadRequest)

	// Writes and their refusals.
	expect("POST", "/v1/clusters", `{"name":"walk","spec":{"release":{"version":"`+newRelease+`"}}}`, http.StatusConflict)
	expect("POST", "/v1/clusters/walk/nodepools", `{"name":"np","spec":{"replicas":0}}`, http.StatusBadRequest)
	expect("POST", "/v1/clusters/walk/nodepools",
		`{"name":"np","spec":{"replicas":0,"release":{"version":"`+newRelease+`"},"management":{"upgradeType":"Replace"}}}`, http.StatusAccepted)
	expect("GET", "/v1/clusters/walk/nodepools/np", "", http.StatusOK)
	expect("PATCH", "/v1/clusters/walk/nodepools/np", `{"spec":{"replicas":-1}}`, http.StatusBadRequest)
	expect("PATCH", "/v1/clusters/walk/nodepools/np", `{"spec":{"nodeLabels":{"team":"api"}}}`, http.StatusOK)
	expect("POST", "/v1/clusters/walk/machines/nope/fault", `{"type":"`+api.FaultStopHeartbeats+`"}`, http.StatusNotFound)
	// A kubeconfig of the caller's own (pkid): with and without a body, a ttl out of range.
	expect("POST", "/v1/clusters/walk/kubeconfigs", `{"ttl":"30m"}`, http.StatusOK)
	expect("POST", "/v1/clusters/walk/kubeconfigs", "", http.StatusOK)
	expect("POST", "/v1/clusters/walk/kubeconfigs", `{"ttl":"forever"}`, http.StatusBadRequest)
	expect("POST", "/v1/clusters/nope/kubeconfigs", "", http.StatusNotFound)
	expect("POST", "/v1/clusters/walk/pki/rotate", "", http.StatusAccepted)
	expect("DELETE", "/v1/clusters/walk/nodepools/np", "", http.StatusAccepted)

	// A body that is not JSON, sent as something else: 415.
	hc := &http.Client{Transport: apicheck.ForTest(t, nil)}
	req, _ := http.NewRequestWithContext(ctx(t), "PATCH", s.URL()+"/v1/clusters/walk", strings.NewReader("spec: {}"))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/yaml")
	if resp, err := hc.Do(req); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("PATCH as YAML: %d, want 415", resp.StatusCode)
	}

	deleteCluster(t, s, c, "walk", available)
}
