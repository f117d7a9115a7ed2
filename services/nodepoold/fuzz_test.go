package nodepoold

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// FuzzCheckConfigDocument: a config document a user sends in a pool's spec.config, checked as
// POST and PATCH check it (api.ValidateNodePool with checkConfigDocument), never panics;
// checkConfigDocument refuses exactly what pkg/ignition cannot parse, naming the document (quoted,
// so a name that is not valid UTF-8 still reads),
// and the pool's validation reports it on the document's content.
func FuzzCheckConfigDocument(f *testing.F) {
	for _, s := range []struct{ name, content string }{
		{"motd", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hello","contents":{"source":"data:,hello"},"mode":420}]}}`},
		{"units", `{"kind":"MachineConfig","spec":{"config":{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"a.service","enabled":true}]}}}}`},
		{"yaml", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n"},
		{"reserved", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/kubernetes/pki/ca.crt","contents":{"source":"data:,x"}}]}}`},
		{"old", `{"ignition":{"version":"2.2.0"}}`}, {"secret", "kind: Secret\n"}, {"Bad_Name", "{}"}, {"", " "}, {"x", "{"},
	} {
		f.Add(s.name, s.content)
	}
	cluster := api.Cluster{Spec: api.ClusterSpec{Release: api.Release{Version: "1.34.4"}, Platform: api.Platform{Type: api.PlatformLocal}}}
	f.Fuzz(func(t *testing.T, name, content string) {
		doc := api.ConfigDocument{Name: name, Content: content}
		err := checkConfigDocument(doc)
		_, parseErr := ignition.ParseDocument(content)
		if (err == nil) != (parseErr == nil) || (err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", name))) {
			t.Fatalf("checkConfigDocument(%q) = %v; ignition.ParseDocument says %v", content, err, parseErr)
		}
		replicas := int32(1)
		np := api.NodePool{Cluster: "demo", Spec: api.NodePoolSpec{Replicas: &replicas, Release: api.Release{Version: "1.34.4"},
			Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace}, Config: []api.ConfigDocument{doc}}}
		np.Name = "workers"
		np.Spec.Default(&cluster.Spec)
		verr := api.ValidateNodePool(&np, &cluster, api.NodePoolChecks{Config: checkConfigDocument})
		var ae *api.Error
		if verr != nil && (!errors.As(verr, &ae) || ae.Code != api.CodeInvalid) {
			t.Fatalf("ValidateNodePool with document %q: %v, want an Invalid api.Error", content, verr)
		}
		if err != nil && strings.TrimSpace(content) != "" && !hasFieldError(ae, "spec.config[0].content") {
			t.Fatalf("document %q is refused (%v) but the pool's validation does not say so: %v", content, err, verr)
		}
	})
}

func hasFieldError(e *api.Error, field string) bool {
	if e == nil {
		return false
	}
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}
