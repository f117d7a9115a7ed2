package pkid_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/pkid"
)

const (
	// upTimeout bounds a guest control plane's start: generous, the machine is shared.
	upTimeout = 5 * time.Minute
	// Bootstrap token of node pool "a", as ignitiond creates it.
	tokenID     = "abc123"
	tokenSecret = "0123456789abcdef"
)

// guestEnv is a real guest control plane (componentd's process runtime, on infra the test
// allocates as infrad would), pkid approving its CSRs, and a real management kube-apiserver
// with Cluster API's CRDs where the test writes Machines.
type guestEnv struct {
	t        *testing.T
	h        *harness
	pkid     *pkidProc
	cluster  string
	mgmt     client.Client // the management cluster, where the test writes Machines
	admin    *kubernetes.Clientset
	guestCfg *rest.Config // the admin config: the guest's URL and CA
	signerCA *x509.CertPool
}

func startGuest(t *testing.T, cluster string) *guestEnv {
	t.Helper()
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	mgmt := testenv.KubeAPIServer(t)
	ctx := t.Context()
	if err := crd.Install(ctx, mgmt.RESTConfig, capi.CRDs, "test"); err != nil {
		t.Fatal(err)
	}
	mgmtCS, err := mgmt.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := api.ControlPlaneNamespace(cluster)
	if _, err := mgmtCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgmtClient, err := client.New(mgmt.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	h := newHarness(t)
	h.StartComponentd() // the processes it leaves running are stopped by the stack
	p := h.startPKID(pkid.Config{Base: daemon.Base{ManagementKubeconfig: mgmt.KubeconfigPath}})

	h.createCluster(cluster, nil)
	h.putInfra(localInfra(t, cluster))
	testenv.Eventually(t, upTimeout, func() bool {
		for _, c := range []string{api.ComponentKubeAPIServer, api.ComponentControllerManager} {
			comp, _, err := h.controlplane.Get(ctx, cluster+"."+c)
			if err != nil || !comp.Status.Conditions.IsTrue(api.ConditionAvailable) {
				return false
			}
		}
		return true
	}, "kube-apiserver and kube-controller-manager of %s available", cluster)

	gc, err := guest.NewClients(h.pki, h.sealKey()).For(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, err := h.pki.Get(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	signerCA := x509.NewCertPool()
	signerCA.AppendCertsFromPEM(bundle.Certs[api.CertKubeletSigner].CertPEM)
	g := &guestEnv{t: t, h: h, pkid: p, cluster: cluster, mgmt: mgmtClient,
		admin: gc.Clientset, guestCfg: gc.RESTConfig, signerCA: signerCA}
	g.bootstrapToken("a")
	return g
}

// localInfra allocates free loopback ports for a SingleReplica control plane, as infrad does.
func localInfra(t *testing.T, cluster string) api.Infra {
	t.Helper()
	ports := make([]int, 5)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	ep := api.Endpoint{Host: "127.0.0.1", Port: ports[0]}
	return api.Infra{
		ObjectMeta:             api.ObjectMeta{Name: cluster},
		ClusterGeneration:      1,
		Platform:               api.PlatformLocal,
		Endpoint:               ep,
		APIServers:             []api.Endpoint{ep},
		Etcd:                   []api.EtcdMember{{Name: "etcd-0", Host: "127.0.0.1", ClientPort: ports[1], PeerPort: ports[2]}},
		ControllerManagerPorts: []int{ports[3]},
		SchedulerPorts:         []int{ports[4]},
		Ready:                  true,
	}
}

// bootstrapToken creates node pool np's bootstrap token and lets bootstrappers create CSRs,
// as ignitiond does.
func (g *guestEnv) bootstrapToken(np string) {
	g.t.Helper()
	ctx := g.t.Context()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + tokenID},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": tokenID, "token-secret": tokenSecret,
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              api.BootstrapGroupPrefix + np,
		},
	}
	if _, err := g.admin.CoreV1().Secrets("kube-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hostplane:node-bootstrapper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:bootstrappers"}},
	}
	if _, err := g.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
}

// bootstrapClient authenticates with pool "a"'s bootstrap token.
func (g *guestEnv) bootstrapClient() *kubernetes.Clientset {
	g.t.Helper()
	cfg := &rest.Config{Host: g.guestCfg.Host, BearerToken: tokenID + "." + tokenSecret,
		TLSClientConfig: rest.TLSClientConfig{CAData: g.guestCfg.CAData, ServerName: g.guestCfg.ServerName}}
	return mustClientset(g.t, cfg)
}

// certClient authenticates with a client certificate.
func (g *guestEnv) certClient(certPEM, keyPEM []byte) *kubernetes.Clientset {
	g.t.Helper()
	cfg := &rest.Config{Host: g.guestCfg.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: g.guestCfg.CAData, ServerName: g.guestCfg.ServerName, CertData: certPEM, KeyData: keyPEM}}
	return mustClientset(g.t, cfg)
}

func mustClientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// addMachine writes a Cluster API Machine of node pool np, as Cluster API would.
func (g *guestEnv) addMachine(name, np string) {
	g.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: api.ControlPlaneNamespace(g.cluster),
			Name:      name,
			Labels:    map[string]string{pkid.LabelClusterName: g.cluster, api.LabelNodePool: np},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: g.cluster,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(np + "-userdata")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: api.InfrastructureGroup, Kind: "LocalMachine", Name: name,
			},
		},
	}
	if err := g.mgmt.Create(g.t.Context(), m); err != nil {
		g.t.Fatal(err)
	}
}

// requestCert creates, through cs, a kubelet client CSR for node and returns its name and
// the private key.
func (g *guestEnv) requestCert(cs *kubernetes.Clientset, node string) (string, []byte) {
	g.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		g.t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		g.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		g.t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	var created *certificatesv1.CertificateSigningRequest
	// The bootstrap token authenticator reads the token Secret through its informer: the
	// first requests may be refused.
	testenv.Eventually(g.t, wait, func() bool {
		created, err = cs.CertificatesV1().CertificateSigningRequests().Create(g.t.Context(), csr, metav1.CreateOptions{})
		return err == nil
	}, "create a CSR for %s; last error %v", node, &err)
	return created.Name, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// waitIssued waits until CSR name is approved by pkid and signed, and returns the certificate.
func (g *guestEnv) waitIssued(name string) []byte {
	g.t.Helper()
	var csr *certificatesv1.CertificateSigningRequest
	testenv.Eventually(g.t, wait, func() bool {
		var err error
		csr, err = g.admin.CertificatesV1().CertificateSigningRequests().Get(g.t.Context(), name, metav1.GetOptions{})
		return err == nil && len(csr.Status.Certificate) > 0
	}, "CSR %s approved and signed", name)
	i := slices.IndexFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateApproved
	})
	if i < 0 || csr.Status.Conditions[i].Reason != pkid.ApprovalReason || csr.Status.Conditions[i].Status != corev1.ConditionTrue {
		g.t.Fatalf("CSR %s conditions %+v: no Approved=True with reason %s", name, csr.Status.Conditions, pkid.ApprovalReason)
	}
	return csr.Status.Certificate
}

// pending reports whether CSR name has neither been approved nor denied.
func (g *guestEnv) pending(name string) bool {
	g.t.Helper()
	csr, err := g.admin.CertificatesV1().CertificateSigningRequests().Get(g.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	return len(csr.Status.Conditions) == 0 && len(csr.Status.Certificate) == 0
}

// waitDecisions waits until hostplane_pkid_csr_decisions_total{outcome} reaches n.
func (g *guestEnv) waitDecisions(outcome string, n float64) {
	g.t.Helper()
	var v float64
	testenv.Eventually(g.t, wait, func() bool {
		v, _ = testenv.Metric(g.t, g.pkid.reg, "hostplane_pkid_csr_decisions_total", map[string]string{"outcome": outcome})
		return v == n
	}, "%s decisions = %v; last %v", outcome, n, &v)
}

// whoAmI returns the user cs authenticates as.
func (g *guestEnv) whoAmI(cs *kubernetes.Clientset) authenticationv1.UserInfo {
	g.t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(g.t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		g.t.Fatalf("self subject review: %v", err)
	}
	return r.Status.UserInfo
}

func TestCSRApproval_ApprovesOnlyKubeletCSRsOfMachinesOfTheTokensNodePool(t *testing.T) {
	g := startGuest(t, "demo")
	g.addMachine("demo-a-1", "a")
	g.addMachine("demo-b-1", "b")
	boot := g.bootstrapClient()

	// A node name that is no Machine stays pending.
	ghost, _ := g.requestCert(boot, "ghost")
	g.waitDecisions(pkid.OutcomeUnknownMachine, 1)
	if !g.pending(ghost) {
		t.Fatalf("CSR %s of a node that is no Machine was decided", ghost)
	}

	// A Machine of pool b asked for with pool a's token stays pending.
	wrongPool, _ := g.requestCert(boot, "demo-b-1")
	g.waitDecisions(pkid.OutcomeWrongNodePool, 1)
	if !g.pending(wrongPool) {
		t.Fatalf("CSR %s of pool b's Machine with pool a's token was decided", wrongPool)
	}

	// A Machine of pool a gets its certificate, signed by kubelet-signer, which
	// kube-apiserver trusts: the node authenticates as itself.
	joined, key := g.requestCert(boot, "demo-a-1")
	certPEM := g.waitIssued(joined)
	cert := parseCert(t, certPEM)
	if cert.Subject.CommonName != "system:node:demo-a-1" {
		t.Fatalf("certificate subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: g.signerCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("certificate not signed by kubelet-signer: %v", err)
	}
	node := g.certClient(certPEM, key)
	if u := g.whoAmI(node); u.Username != "system:node:demo-a-1" || !slices.Contains(u.Groups, "system:nodes") {
		t.Fatalf("the node's certificate authenticates as %+v", u)
	}

	// The node renews its own certificate.
	renewal, _ := g.requestCert(node, "demo-a-1")
	g.waitIssued(renewal)

	// A CSR created before its Machine is visible is approved once the Machine appears.
	late, _ := g.requestCert(boot, "demo-a-2")
	g.waitDecisions(pkid.OutcomeUnknownMachine, 2)
	g.addMachine("demo-a-2", "a")
	g.waitIssued(late)
	g.waitDecisions(pkid.OutcomeApproved, 3)

	for _, name := range []string{ghost, wrongPool} {
		if !g.pending(name) {
			t.Fatalf("CSR %s was decided", name)
		}
	}
	// Each decision was counted once, however often the CSRs were looked at again.
	g.waitDecisions(pkid.OutcomeUnknownMachine, 2)
	g.waitDecisions(pkid.OutcomeWrongNodePool, 1)

	// Once the node is registered, pool a's bootstrap token gets no second certificate for it
	// (every holder of the token, any machine of the pool, would act as that node); the node
	// still renews its own.
	if _, err := node.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "demo-a-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the node registers itself: %v", err)
	}
	second, _ := g.requestCert(boot, "demo-a-1")
	g.waitDecisions(pkid.OutcomeNodeExists, 1)
	if !g.pending(second) {
		t.Fatalf("CSR %s: pool a's bootstrap token got a second certificate for the registered node demo-a-1", second)
	}
	renewed, _ := g.requestCert(node, "demo-a-1")
	g.waitIssued(renewed)
}

// The autoscaler's identity (system:hostplane:karpenter, in no group) gets the guest RBAC
// pkid applies: what Karpenter's work needs (nodes, pods' eviction, its CRDs, NodeClaims)
// and nothing more (no Secrets, no RBAC, no other CRD).
func TestGuestGrants_TheAutoscalerMayDoItsWorkAndNothingMore(t *testing.T) {
	g := startGuest(t, "demo")
	bundle, _, err := g.h.pki.Get(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	kc := bundle.Certs[api.CertKarpenter]
	key, err := g.h.sealKey().Open(kc.SealedKey)
	if err != nil {
		t.Fatal(err)
	}
	cs := g.certClient(kc.CertPEM, key)
	if u := g.whoAmI(cs); u.Username != pkid.KarpenterUser || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("the autoscaler authenticates as %+v, want %s outside system:masters", u, pkid.KarpenterUser)
	}
	allowed := func(verb, group, resource, ns, name string) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review: %v", err)
		}
		return r.Status.Allowed
	}
	may := []struct{ verb, group, resource, ns, name string }{
		{"list", "", "nodes", "", ""},
		{"delete", "", "nodes", "", ""},
		{"create", "", "pods/eviction", "default", ""},
		{"watch", "", "pods", "", ""},
		{"create", "karpenter.sh", "nodeclaims", "", ""},
		{"patch", "karpenter.sh", "nodepools", "", ""},
		{"create", "karpenter.hostplane.dev", "hostplanenodeclasses", "", ""},
		{"patch", "apiextensions.k8s.io", "customresourcedefinitions", "", "nodepools.karpenter.sh"},
		{"list", "policy", "poddisruptionbudgets", "", ""},
		{"delete", "coordination.k8s.io", "leases", "kube-node-lease", ""},
	}
	mayNot := []struct{ verb, group, resource, ns, name string }{
		{"get", "", "secrets", "kube-system", ""},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"patch", "apiextensions.k8s.io", "customresourcedefinitions", "", "machines.cluster.x-k8s.io"},
		{"delete", "", "namespaces", "", "default"},
		{"delete", "coordination.k8s.io", "leases", "kube-system", ""},
		{"create", "", "pods", "default", ""},
	}
	testenv.Eventually(t, time.Minute, func() bool { return allowed("list", "", "nodes", "", "") },
		"the autoscaler's grants were never applied")
	for _, a := range may {
		if !allowed(a.verb, a.group, a.resource, a.ns, a.name) {
			t.Errorf("the autoscaler may not %s %s.%s %s/%s; it needs to", a.verb, a.resource, a.group, a.ns, a.name)
		}
	}
	for _, a := range mayNot {
		if allowed(a.verb, a.group, a.resource, a.ns, a.name) {
			t.Errorf("the autoscaler may %s %s.%s %s/%s", a.verb, a.resource, a.group, a.ns, a.name)
		}
	}
}
