package nodepoold

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/auth/authtest"
)

// A viewer reads a pool's config documents redacted unless its token has the config grant;
// an admin reads them whole; a redacted document sent back is refused, never stored empty.
func TestNodePoolAPI_ConfigDocumentsAreRedactedForViewersWithoutTheGrant(t *testing.T) {
	e := start(t, nil)
	e.putCluster("demo", "1.34.4")
	e.createPool("demo", poolBody("workers", replace3, `"config":[{"name":"motd","content":"`+motd+`"}]`))
	url := authtest.Server(t, e.d.Routes,
		auth.Token{Name: "viewer", Token: "viewer-0123456789abcdef", Role: auth.RoleViewer},
		auth.Token{Name: "reader", Token: "reader-0123456789abcdef", Role: auth.RoleViewer, Grants: []auth.Grant{auth.GrantConfig}},
		auth.Token{Name: "admin", Token: "admin-0123456789abcdefg", Role: auth.RoleAdmin})
	call := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	docs := func(token, path string) []api.ConfigDocument {
		t.Helper()
		status, b := call(token, http.MethodGet, path, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s as %s: %d %s", path, token, status, b)
		}
		var np api.NodePool
		var list api.NodePoolList
		if strings.HasSuffix(path, "/nodepools") {
			if err := json.Unmarshal(b, &list); err != nil || len(list.Items) != 1 {
				t.Fatalf("list: %v %s", err, b)
			}
			np = list.Items[0]
		} else if err := json.Unmarshal(b, &np); err != nil {
			t.Fatal(err)
		}
		return np.Spec.Config
	}
	for _, path := range []string{"/v1/clusters/demo/nodepools/workers", "/v1/clusters/demo/nodepools"} {
		if got := docs("viewer-0123456789abcdef", path); len(got) != 1 || got[0].Name != "motd" || got[0].Content != "" || !got[0].Redacted {
			t.Errorf("GET %s as a viewer without the grant: %+v, want motd redacted", path, got)
		}
		for _, token := range []string{"reader-0123456789abcdef", "admin-0123456789abcdefg"} {
			if got := docs(token, path); len(got) != 1 || !strings.Contains(got[0].Content, "/etc/motd") || got[0].Redacted {
				t.Errorf("GET %s as %s: %+v, want the document whole", path, token, got)
			}
		}
	}
	status, b := call("admin-0123456789abcdefg", http.MethodPatch, "/v1/clusters/demo/nodepools/workers", `{"spec":{"config":[{"name":"motd","content":"","redacted":true}]}}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "spec.config[0].redacted") {
		t.Fatalf("writing back a redacted document: %d %s, want 400 on spec.config[0].redacted", status, b)
	}
	if got := docs("admin-0123456789abcdefg", "/v1/clusters/demo/nodepools/workers"); len(got) != 1 || !strings.Contains(got[0].Content, "/etc/motd") {
		t.Fatalf("after the refused write: %+v", got)
	}
}
