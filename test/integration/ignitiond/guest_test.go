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
	"k8s.io/client-go/kubernetes"

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
	sec, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(h.Ctx, ignitiond.BootstrapSecretPrefix+rec.Current.BootstrapTokenID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the bootstrap token secret: %v", err)
	}
	if sec.Type != corev1.SecretTypeBootstrapToken || string(sec.Data["token-id"]) != rec.Current.BootstrapTokenID ||
		string(sec.Data["usage-bootstrap-authentication"]) != "true" ||
		string(sec.Data["auth-extra-groups"]) != api.BootstrapGroupPrefix+"workers" ||
		string(sec.Data["expiration"]) != rec.Current.ExpiresAt.Add(ignitiond.DefaultJoinWindow).UTC().Format(time.RFC3339) {
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
	if ui.Username != "system:bootstrap:"+rec.Current.BootstrapTokenID || !slices.Contains(ui.Groups, "system:bootstrappers") ||
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

// A pool's bootstrap token is minted with its Ignition token and expires a join window after
// that token stops being valid: the guest's kube-apiserver then refuses it, while the payload
// of the current token carries a new one that works. Real time: the apiserver checks the
// expiration against its own clock.
func TestGuest_TheBootstrapTokenRotatesWithTheIgnitionTokenAndExpiresAJoinWindowAfterIt(t *testing.T) {
	h := newHarness(t)
	h.createCluster("demo")
	h.startGuest("demo")
	h.startIgnitiond(ignitiond.Config{TokenTTL: 8 * time.Second, Grace: 2 * time.Second, JoinWindow: 2 * time.Second})
	h.waitServer("demo")
	h.putPool("demo", "workers", poolSpec{hash: "h1", release: "1.34.4"})
	first := h.waitTokens("demo", "workers", "ready with its guest bootstrap token", func(r *api.IgnitionTokens) bool {
		return r.Ready && r.Current.ConfigHash == "h1" && r.Message == ""
	})
	c := h.client("demo")
	bootClient := func(rec *api.IgnitionTokens) *kubernetes.Clientset {
		t.Helper()
		s := stub(t, rec)
		cs, err := kube.Clientset(parsePayload(t, fetch(t, c, s.URL, "Bearer "+s.Token)).kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	whoAmI := func(cs *kubernetes.Clientset) (string, error) {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(h.Ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return r.Status.UserInfo.Username, nil
	}
	old := bootClient(first)
	var err error
	testenv.Eventually(t, wait, func() bool { _, err = whoAmI(old); return err == nil }, "the first payload's bootstrap token authenticates; last %v", &err)

	// Rotated at half its lifetime: the new token's payload carries a new bootstrap token.
	rotated := h.waitTokens("demo", "workers", "rotated", func(r *api.IgnitionTokens) bool {
		return r.Current.Token != first.Current.Token
	})
	if rotated.Current.BootstrapTokenID == first.Current.BootstrapTokenID {
		t.Fatalf("the rotated Ignition token's bootstrap token id is the first's, %s", first.Current.BootstrapTokenID)
	}

	// The first's is refused once its grace and the join window are over.
	testenv.Eventually(t, wait, func() bool {
		_, err = whoAmI(old)
		return apierrors.IsUnauthorized(err)
	}, "the first bootstrap token refused after its join window; last %v", &err)
	now := h.waitTokens("demo", "workers", "current", func(*api.IgnitionTokens) bool { return true })
	user, err := whoAmI(bootClient(now))
	if err != nil || user != "system:bootstrap:"+now.Current.BootstrapTokenID {
		t.Fatalf("the current payload's bootstrap token: %q, %v", user, err)
	}
}
