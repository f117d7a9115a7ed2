package ignitiond_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hostplane/hostplane/test/integration/stack"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/ignitiond"
)

// upTimeout bounds a guest control plane's start: generous, the machine is shared.
const upTimeout = 5 * time.Minute

// startGuest runs the real componentd so that cluster gets a real control plane, and waits
// until its kube-apiserver is available. It needs the release binaries (make k8s-bins).
func (h *harness) startGuest(cluster string) {
	h.T.Helper()
	testenv.RequireBinaries(h.T, release.Latest(), release.Components()...)
	d, err := componentd.New(componentd.Config{Base: h.Base(componentd.Name, observe.NewRegistry())})
	if err != nil {
		h.T.Fatal(err)
	}
	h.Run("componentd", d)
	components := h.components()
	testenv.Eventually(h.T, upTimeout, func() bool {
		c, _, err := components.Get(h.Ctx, api.ComponentKey(cluster, api.ComponentKubeAPIServer))
		return err == nil && c.Status.Conditions.IsTrue(api.ConditionAvailable)
	}, "the kube-apiserver of %s available", cluster)
}

func (h *harness) components() *store.Store[api.ControlPlaneComponent] {
	return stack.Bucket[api.ControlPlaneComponent](h.Env, bus.BucketControlPlane)
}

func TestGuest_BootstrapTokenAndBindingAppearAndAuthenticateThePoolsGroup(t *testing.T) {
	h := newHarness(t)
	h.createCluster("demo")
	h.startGuest("demo")
	h.startIgnitiond(ignitiond.Config{})
	h.waitServer("demo")
	h.putPool("demo", "workers", poolSpec{hash: "h1", release: "1.34.4"})
	rec := h.waitTokens("demo", "workers", "ready with its guest bootstrap token", func(r *api.IgnitionTokens) bool {
		return r.Ready && r.Current.ConfigHash == "h1" && r.Message == ""
	})

	admin := h.AdminClientset("demo")
	sec, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(h.Ctx, ignitiond.BootstrapSecretPrefix+rec.BootstrapTokenID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the bootstrap token secret: %v", err)
	}
	if sec.Type != corev1.SecretTypeBootstrapToken || string(sec.Data["token-id"]) != rec.BootstrapTokenID ||
		string(sec.Data["usage-bootstrap-authentication"]) != "true" ||
		string(sec.Data["auth-extra-groups"]) != api.BootstrapGroupPrefix+"workers" || len(sec.Data["expiration"]) != 0 {
		t.Errorf("bootstrap token secret %s: type %s, data %v", sec.Name, sec.Type, sec.Data)
	}
	crb, err := admin.RbacV1().ClusterRoleBindings().Get(h.Ctx, ignitiond.NodeBootstrapperBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the node-bootstrapper binding: %v", err)
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != "system:node-bootstrapper" || len(crb.Subjects) != 1 ||
		crb.Subjects[0].Kind != "Group" || crb.Subjects[0].Name != "system:bootstrappers" {
		t.Errorf("binding %+v %+v", crb.RoleRef, crb.Subjects)
	}

	// The payload's bootstrap kubeconfig authenticates as the pool's bootstrap identity and
	// may use the CSR API.
	s := stub(t, rec)
	got := parsePayload(t, fetch(t, h.client("demo"), s.URL, "Bearer "+s.Token))
	boot, err := kube.Clientset(got.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	review, err := boot.AuthenticationV1().SelfSubjectReviews().Create(h.Ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("authenticate with the bootstrap token: %v", err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "system:bootstrap:"+rec.BootstrapTokenID || !slices.Contains(ui.Groups, "system:bootstrappers") ||
		!slices.Contains(ui.Groups, api.BootstrapGroupPrefix+"workers") {
		t.Errorf("bootstrap identity %s %v", ui.Username, ui.Groups)
	}
	if _, err := boot.CertificatesV1().CertificateSigningRequests().List(h.Ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the bootstrap identity cannot use the CSR API: %v", err)
	}

	// A deleted pool's Secret goes with its record.
	h.deletePool("demo", "workers")
	testenv.Eventually(t, wait, func() bool {
		_, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(h.Ctx, sec.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the bootstrap token secret deleted")
	testenv.Eventually(t, wait, func() bool {
		_, _, err := h.tokens.Get(h.Ctx, "demo.workers")
		return err != nil
	}, "the token record deleted")
}
