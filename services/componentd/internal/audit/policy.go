package audit

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
)

// Verbs whose request bodies WriteRequestBodies and AllRequestBodies log.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// readVerbs are the reads whose bodies AllRequestBodies logs as well. A read carries no
// request body: what is logged for it is the object or list it returned. Watches are left
// out: their answer is a stream, which audit events do not carry.
var readVerbs = []string{"get", "list"}

// sensitive are the resources whose bodies no profile logs, only their metadata: they hold
// credentials or opaque data (Secrets, ConfigMaps) or tokens (TokenReview requests carry
// one, TokenRequest answers mint one).
var sensitive = []auditv1.GroupResources{
	{Group: "", Resources: []string{"secrets", "configmaps", "serviceaccounts/token"}},
	{Group: "authentication.k8s.io", Resources: []string{"tokenreviews"}},
}

// probes are the health endpoints the load balancer and componentd poll several times a
// second; logging them would bury every request of a person or a controller.
var probes = []string{"/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*"}

// Policy returns the audit policy of profile (one of api.AuditProfiles; "" is
// api.AuditDefault). Rules are evaluated in order, the first match decides:
//
//   - every profile but None logs nothing of the health probes, only the metadata of the
//     other non-resource requests and of the sensitive resources, and one event per request (at ResponseComplete, or ResponseStarted
//     too for a long-running request such as a watch);
//   - Default logs the metadata of every other request;
//   - WriteRequestBodies adds the request bodies of writes;
//   - AllRequestBodies adds, on top, the bodies of reads (what a get or list returned);
//   - None logs nothing.
func Policy(profile string) (*auditv1.Policy, error) {
	p := &auditv1.Policy{
		TypeMeta: metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Policy"},
		// The RequestReceived stage repeats what ResponseComplete says a moment later.
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		// managedFields say which client set which field: noise in a request body.
		OmitManagedFields: true,
	}
	if profile == api.AuditNone {
		p.Rules = []auditv1.PolicyRule{{Level: auditv1.LevelNone}}
		return p, nil
	}
	p.Rules = []auditv1.PolicyRule{
		{Level: auditv1.LevelNone, NonResourceURLs: probes},
		// Discovery, /version, /metrics: no body worth logging, and some answers (the
		// OpenAPI documents) are megabytes.
		{Level: auditv1.LevelMetadata, NonResourceURLs: []string{"*"}},
		{Level: auditv1.LevelMetadata, Resources: sensitive},
	}
	switch profile {
	case "", api.AuditDefault:
	case api.AuditWriteRequestBodies:
		p.Rules = append(p.Rules, auditv1.PolicyRule{Level: auditv1.LevelRequest, Verbs: writeVerbs})
	case api.AuditAllRequestBodies:
		p.Rules = append(p.Rules,
			auditv1.PolicyRule{Level: auditv1.LevelRequest, Verbs: writeVerbs},
			auditv1.PolicyRule{Level: auditv1.LevelRequestResponse, Verbs: readVerbs})
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownProfile, profile)
	}
	p.Rules = append(p.Rules, auditv1.PolicyRule{Level: auditv1.LevelMetadata})
	return p, nil
}

// PolicyFile is Policy(profile) as kube-apiserver's --audit-policy-file reads it (YAML).
func PolicyFile(profile string) ([]byte, error) {
	p, err := Policy(profile)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("audit policy %s: %w", profile, err)
	}
	return b, nil
}
