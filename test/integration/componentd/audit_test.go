package componentd_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/test/integration/stack"
)

// auditOf GETs the cluster's audit events with query; the answer must be 200.
func auditOf(t *testing.T, cd *componentdProc, cluster string, query url.Values) ([]api.AuditEvent, []byte) {
	t.Helper()
	status, ctype, body := get(t, cd.url+"/v1/clusters/"+cluster+"/audit?"+query.Encode())
	var l api.AuditEventList
	if err := json.Unmarshal(body, &l); status != http.StatusOK || ctype != "application/json" || err != nil || l.Items == nil {
		t.Fatalf("GET audit?%s: %d %s: %s", query.Encode(), status, ctype, body)
	}
	return l.Items, body
}

// find returns the events of verb on the named object of resource.
func find(evs []api.AuditEvent, verb, resource, name string) []api.AuditEvent {
	var out []api.AuditEvent
	for _, e := range evs {
		if e.Verb == verb && e.ObjectRef != nil && e.ObjectRef.Resource == resource && e.ObjectRef.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// whoAmI is the username the admin kubeconfig authenticates as, as kube-apiserver sees it.
func whoAmI(h *harness, cs *kubernetes.Clientset) string {
	h.T.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(h.Ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	return r.Status.UserInfo.Username
}

func TestComponentd_AuditLog_WriteRequestBodiesThenNone(t *testing.T) {
	h := newHarnessFor(t, "1.34.4")
	h.StartInfrad()
	h.StartPKID()
	cd := h.startComponentd()

	c := stack.Cluster("aud", "1.34.4", api.SingleReplica)
	c.Spec.Configuration = &api.ClusterConfiguration{APIServer: &api.APIServerConfiguration{Audit: &api.Audit{Profile: api.AuditWriteRequestBodies}}}
	c.Spec.Default()
	h.CreateCluster(c)
	comps := h.waitSettled("aud", "1.34.4")
	cs := h.AdminClientset("aud")
	admin := whoAmI(h, cs)

	// A ConfigMap and a Secret (sensitive: metadata only) and a ServiceAccount (its body).
	const cmValue, secretValue = "cm-value-7f3a91", "secret-value-c2e845"
	if _, err := cs.CoreV1().ConfigMaps("default").Create(h.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-cm"}, Data: map[string]string{"setting": cmValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("default").Create(h.Ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-secret"}, StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(h.Ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-sa", Labels: map[string]string{"audit": "body"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	mine := url.Values{"user": {admin}, "verb": {"create"}}
	var evs []api.AuditEvent
	var raw []byte
	testenv.Eventually(t, wait, func() bool {
		evs, raw = auditOf(t, cd, "aud", mine)
		return len(find(evs, "create", "configmaps", "audit-cm")) == 1 && len(find(evs, "create", "secrets", "audit-secret")) == 1 &&
			len(find(evs, "create", "serviceaccounts", "audit-sa")) == 1
	}, "the admin's creates of audit-cm, audit-secret and audit-sa in GET /v1/clusters/aud/audit")
	for _, e := range evs {
		if e.User.Username != admin || e.Verb != "create" || e.Stage != "ResponseComplete" {
			t.Errorf("filtered by user and verb, got %s %s at %s", e.User.Username, e.Verb, e.Stage)
		}
	}
	cm := find(evs, "create", "configmaps", "audit-cm")[0]
	if cm.Level != "Metadata" || cm.RequestObject != nil || cm.ObjectRef.Namespace != "default" || cm.ResponseStatus == nil || cm.ResponseStatus.Code != http.StatusCreated {
		t.Errorf("ConfigMap create: level %s, code %+v, body %s; want Metadata, 201, no body", cm.Level, cm.ResponseStatus, cm.RequestObject)
	}
	secret := find(evs, "create", "secrets", "audit-secret")[0]
	if secret.Level != "Metadata" || secret.RequestObject != nil {
		t.Errorf("Secret create: level %s, body %s; want Metadata without a body", secret.Level, secret.RequestObject)
	}
	sa := find(evs, "create", "serviceaccounts", "audit-sa")[0]
	var body corev1.ServiceAccount
	if err := json.Unmarshal(sa.RequestObject, &body); err != nil || sa.Level != "Request" || body.Name != "audit-sa" || body.Labels["audit"] != "body" {
		t.Errorf("ServiceAccount create: level %s, body %s (%v); want Request with the ServiceAccount sent", sa.Level, sa.RequestObject, err)
	}
	for _, v := range []string{cmValue, secretValue} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the audit log shows the value %s of a ConfigMap or Secret", v)
		}
	}

	// Filters, limit and bad queries.
	if one, _ := auditOf(t, cd, "aud", url.Values{"limit": {"1"}}); len(one) != 1 {
		t.Errorf("limit=1 returned %d events", len(one))
	}
	sas, _ := auditOf(t, cd, "aud", url.Values{"resource": {"serviceaccounts"}, "verb": {"create"}, "user": {admin}})
	if len(sas) != 1 || sas[0].ObjectRef.Name != "audit-sa" {
		t.Errorf("resource=serviceaccounts&verb=create&user=%s: %d events", admin, len(sas))
	}
	if later, _ := auditOf(t, cd, "aud", url.Values{"since": {"2999-01-01T00:00:00Z"}}); len(later) != 0 {
		t.Errorf("since the year 2999: %d events", len(later))
	}
	for path, want := range map[string]int{
		"/v1/clusters/nope/audit":               http.StatusNotFound,
		"/v1/clusters/aud/audit?limit=0":        http.StatusBadRequest,
		"/v1/clusters/aud/audit?limit=1001":     http.StatusBadRequest,
		"/v1/clusters/aud/audit?since=tomorrow": http.StatusBadRequest,
	} {
		if status, _, body := get(t, cd.url+path); status != want {
			t.Errorf("GET %s: %d %s, want %d", path, status, body, want)
		}
	}

	// Profile None: kube-apiserver restarts with it and logs nothing more.
	settledBefore := comps
	before := comps[api.ComponentKubeAPIServer].Value
	if _, _, err := h.clusters.Mutate(h.Ctx, "aud", true, func(c *api.Cluster) error {
		c.Spec.Configuration.APIServer.Audit.Profile = api.AuditNone
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.PublishCluster("aud", "updated")
	testenv.Eventually(t, upTimeout, func() bool {
		comps = h.componentsOf("aud")
		kas := comps[api.ComponentKubeAPIServer].Value
		return kas.Spec.ConfigHash != before.Spec.ConfigHash && settled(comps, "1.34.4")
	}, "kube-apiserver rolled to the None profile")
	after := comps[api.ComponentKubeAPIServer].Value
	if after.Status.Replicas[0].Pid == before.Status.Replicas[0].Pid {
		t.Fatalf("kube-apiserver kept pid %d through the profile change", after.Status.Replicas[0].Pid)
	}
	for _, name := range []string{api.ComponentEtcd, api.ComponentControllerManager, api.ComponentScheduler} {
		if comps[name].Value.Spec.ConfigHash != settledBefore[name].Value.Spec.ConfigHash {
			t.Errorf("%s rolled for an audit profile change", name)
		}
	}
	all := url.Values{"limit": {"1000"}}
	snapshot, _ := auditOf(t, cd, "aud", all)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(h.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-none"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(h.Ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "after-none"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(h.Ctx, "after-none", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	now, _ := auditOf(t, cd, "aud", all)
	if !slices.EqualFunc(now, snapshot, func(a, b api.AuditEvent) bool { return a.AuditID == b.AuditID }) {
		t.Errorf("with profile None, %d events became %d; the newest now: %+v", len(snapshot), len(now), now[max(0, len(now)-1):])
	}
	if len(find(now, "create", "serviceaccounts", "after-none")) > 0 || len(find(now, "create", "configmaps", "after-none")) > 0 {
		t.Error("with profile None, the creates after the restart were logged")
	}
	// What was logged before stays readable.
	if len(find(now, "create", "serviceaccounts", "audit-sa")) != 1 {
		t.Error("the events logged before the switch to None are gone")
	}
}

func TestComponentd_AuditLog_HighlyAvailable_ReadsEveryReplicasLog(t *testing.T) {
	h := newHarnessFor(t, "1.34.4")
	h.StartInfrad()
	h.StartPKID()
	cd := h.startComponentd()
	h.createCluster("haud", "1.34.4", api.HighlyAvailable)
	h.waitSettled("haud", "1.34.4")

	// One ConfigMap through each replica, addressed directly (not through the load balancer).
	inf, _, err := stack.Bucket[api.Infra](h.Env, bus.BucketInfra).Get(h.Ctx, "haud")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(h.AdminKubeconfig("haud"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inf.APIServers) != 2 {
		t.Fatalf("%d kube-apiserver endpoints, want 2", len(inf.APIServers))
	}
	for n, ep := range inf.APIServers {
		rc := rest.CopyConfig(cfg)
		rc.Host = "https://" + net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		name := "via-replica-" + strconv.Itoa(n)
		if _, err := cs.CoreV1().ConfigMaps("default").Create(h.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	query := url.Values{"resource": {"configmaps"}, "verb": {"create"}}
	testenv.Eventually(t, wait, func() bool {
		evs, _ := auditOf(t, cd, "haud", query)
		return len(find(evs, "create", "configmaps", "via-replica-0")) == 1 && len(find(evs, "create", "configmaps", "via-replica-1")) == 1
	}, "the creates through both replicas in GET /v1/clusters/haud/audit")
	dir := filepath.Join(h.DataDir, "componentd", "clusters", "haud", "audit")
	for n := range 2 {
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver-"+strconv.Itoa(n)+".log")); err != nil {
			t.Errorf("replica %d's audit log: %v", n, err)
		}
	}
}
