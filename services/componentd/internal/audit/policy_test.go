package audit_test

import (
	"errors"
	"slices"
	"testing"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
)

// request is what kube-apiserver's policy evaluator is asked about.
func request(verb, group, resource, subresource string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{Verb: verb, APIGroup: group, Resource: resource, Subresource: subresource,
		Namespace: "default", ResourceRequest: true}
}

func nonResource(verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{Verb: verb, Path: path}
}

// TestPolicyFile_LogsWhatEachProfilePromises loads each profile's file with kube-apiserver's
// own policy reader and asks its evaluator at which level it audits the requests a user
// would look for.
func TestPolicyFile_LogsWhatEachProfilePromises(t *testing.T) {
	const (
		none     = auditinternal.LevelNone
		metadata = auditinternal.LevelMetadata
		body     = auditinternal.LevelRequest         // the request's body
		both     = auditinternal.LevelRequestResponse // and the answer's
	)
	tests := []struct {
		name string
		req  authorizer.AttributesRecord
		// level per profile: Default, WriteRequestBodies, AllRequestBodies, None
		want [4]auditinternal.Level
	}{
		{"create a deployment", request("create", "apps", "deployments", ""), [4]auditinternal.Level{metadata, body, body, none}},
		{"patch a node's status", request("patch", "", "nodes", "status"), [4]auditinternal.Level{metadata, body, body, none}},
		{"update a role", request("update", "rbac.authorization.k8s.io", "roles", ""), [4]auditinternal.Level{metadata, body, body, none}},
		{"delete a namespace", request("delete", "", "namespaces", ""), [4]auditinternal.Level{metadata, body, body, none}},
		{"delete a collection of pods", request("deletecollection", "", "pods", ""), [4]auditinternal.Level{metadata, body, body, none}},
		{"get a pod", request("get", "", "pods", ""), [4]auditinternal.Level{metadata, metadata, both, none}},
		{"list services", request("list", "", "services", ""), [4]auditinternal.Level{metadata, metadata, both, none}},
		{"watch pods", request("watch", "", "pods", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"create a secret", request("create", "", "secrets", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"get a secret", request("get", "", "secrets", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"list secrets", request("list", "", "secrets", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"update a configmap", request("update", "", "configmaps", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"get a configmap", request("get", "", "configmaps", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"create a token review", request("create", "authentication.k8s.io", "tokenreviews", ""), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"request a service-account token", request("create", "", "serviceaccounts", "token"), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"create a service account", request("create", "", "serviceaccounts", ""), [4]auditinternal.Level{metadata, body, body, none}},
		{"GET /version", nonResource("get", "/version"), [4]auditinternal.Level{metadata, metadata, metadata, none}},
		{"probe /readyz", nonResource("get", "/readyz"), [4]auditinternal.Level{none, none, none, none}},
		{"probe /livez/etcd", nonResource("get", "/livez/etcd"), [4]auditinternal.Level{none, none, none, none}},
		{"probe /healthz", nonResource("get", "/healthz"), [4]auditinternal.Level{none, none, none, none}},
	}
	profiles := []string{api.AuditDefault, api.AuditWriteRequestBodies, api.AuditAllRequestBodies, api.AuditNone}
	for i, profile := range profiles {
		b, err := audit.PolicyFile(profile)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.LoadPolicyFromBytes(b)
		if err != nil {
			t.Fatalf("%s: kube-apiserver refuses the policy: %v\n%s", profile, err, b)
		}
		eval := policy.NewPolicyRuleEvaluator(p)
		for _, tt := range tests {
			got := eval.EvaluatePolicyRule(tt.req)
			if got.Level != tt.want[i] {
				t.Errorf("%s: %s is audited at level %q, want %q", profile, tt.name, got.Level, tt.want[i])
			}
			if got.Level != none && !slices.Contains(got.OmitStages, auditinternal.StageRequestReceived) {
				t.Errorf("%s: %s logs the RequestReceived stage too (two events per request)", profile, tt.name)
			}
			if got.Level != none && !got.OmitManagedFields {
				t.Errorf("%s: %s logs managedFields", profile, tt.name)
			}
		}
	}
}

func TestPolicy_EmptyProfileIsDefaultAndAnUnknownOneFails(t *testing.T) {
	empty, err := audit.PolicyFile("")
	if err != nil {
		t.Fatal(err)
	}
	def, err := audit.PolicyFile(api.AuditDefault)
	if err != nil {
		t.Fatal(err)
	}
	if string(empty) != string(def) {
		t.Errorf("the empty profile's policy differs from Default's:\n%s\n%s", empty, def)
	}
	if _, err := audit.PolicyFile("Verbose"); !errors.Is(err, audit.ErrUnknownProfile) {
		t.Errorf("PolicyFile(Verbose): %v, want ErrUnknownProfile", err)
	}
}

func TestFlags_NameThePolicyTheJSONLogAndItsRetention(t *testing.T) {
	got := audit.Flags(api.Audit{Profile: api.AuditNone, MaxAgeDays: 2, MaxBackups: 4, MaxSizeMB: 50}, "/c/audit-policy.yaml", "/c/audit/kube-apiserver-1.log")
	want := []string{"--audit-policy-file=/c/audit-policy.yaml", "--audit-log-path=/c/audit/kube-apiserver-1.log",
		"--audit-log-format=json", "--audit-log-maxage=2", "--audit-log-maxbackup=4", "--audit-log-maxsize=50"}
	if !slices.Equal(got, want) {
		t.Errorf("Flags = %v\nwant %v", got, want)
	}
}
