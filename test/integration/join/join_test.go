package join_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/localcloud"
	"github.com/hostplane/hostplane/services/localcloud/localcloudtest"
)

const (
	joinWait  = 2 * time.Minute
	tokenID   = "abc123"
	tokenSec  = "0123456789abcdef"
	poolName  = "workers"
	testTaint = "hostplane.dev/test"
)

// runCloud runs a local cloud on dir until the test ends or stop is called.
func runCloud(t *testing.T, dir, sock string) (*localcloud.Client, func()) {
	t.Helper()
	c, err := localcloud.New(localcloud.Config{Dir: dir, Listen: sock, HeartbeatInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := testenv.Run(t, "localcloud", c.Run)
	<-c.Ready()
	cl, err := localcloud.NewClient(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	return cl, stop
}

// bootstrap creates what ignitiond creates in the guest: the pool's bootstrap token and the
// binding that lets bootstrappers create CSRs; it returns the bootstrap kubeconfig.
func bootstrap(t *testing.T, g *guestCluster) []byte {
	t.Helper()
	ctx := t.Context()
	_, err := g.Admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID, Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": tokenID, "token-secret": tokenSec, "usage-bootstrap-authentication": "true",
			"auth-extra-groups": api.BootstrapGroupPrefix + poolName,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hostplane:node-bootstrapper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kube.Kubeconfig(kube.KubeconfigSpec{Server: g.REST.Host, CAPEM: g.REST.CAData,
		Token: tokenID + "." + tokenSec, UserName: "kubelet-bootstrap"})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// approveCSRs approves the pending kubelet client CSRs of the bootstrap token, as pkid does,
// and returns how many kubelet CSRs exist.
func approveCSRs(t *testing.T, g *guestCluster) int {
	t.Helper()
	ctx := t.Context()
	list, err := g.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, csr := range list.Items {
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		n++
		if csr.Spec.Username != "system:bootstrap:"+tokenID || len(csr.Status.Conditions) > 0 {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test",
		})
		if _, err := g.Admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	return n
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyNode approves kubelet CSRs until the Node called name is Ready, and returns it.
func readyNode(t *testing.T, g *guestCluster, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	var err error
	testenv.Eventually(t, joinWait, func() bool {
		approveCSRs(t, g)
		node, err = g.Admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && nodeReady(node)
	}, "node %s Ready; last %v", name, err)
	return node
}

func leaseRenewed(t *testing.T, g *guestCluster, node string) time.Time {
	t.Helper()
	l, err := g.Admin.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return renewTime(l)
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// waitRenewals waits until node's Lease was renewed n more times.
func waitRenewals(t *testing.T, g *guestCluster, node string, n int) {
	t.Helper()
	last := leaseRenewed(t, g, node)
	for i := range n {
		testenv.Eventually(t, joinWait, func() bool {
			r := leaseRenewed(t, g, node)
			if r.After(last) {
				last = r
				return true
			}
			return false
		}, "lease of %s renewed (%d of %d)", node, i+1, n)
	}
}

func TestMachine_JoinsARealGuestCluster_RunsPodsAppliesUpdatesAndResumesAfterARestart(t *testing.T) {
	g := startGuest(t, "guest")
	ctx := t.Context()
	kubeletVersion := "v" + g.Release.Version
	kc := bootstrap(t, g)
	ign := localcloudtest.NewIgnitionServer(t)
	ign.Set(t, "t1", localcloudtest.NodePayload(t, kc, g.REST.CAData, localcloud.KubeletConfig{
		NodeLabels:     map[string]string{"pool": poolName, "stale": "yes", "node-role.kubernetes.io/worker": ""},
		Taints:         []corev1.Taint{{Key: testTaint, Value: "x", Effect: corev1.TaintEffectNoSchedule}},
		ConfigHash:     "hash-1",
		KubeletVersion: kubeletVersion,
	}))

	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "lc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := "unix://" + filepath.Join(sockDir, "cloud.sock")
	cl, stop := runCloud(t, dir, sock)

	names := []string{"workers-a", "workers-b"}
	for _, n := range names {
		if _, err := cl.Create(ctx, localcloud.MachineSpec{Cluster: g.Name, Name: n, NodePool: poolName,
			UserData: ign.Stub(t, "t1"), ProviderID: api.ProviderID(g.Name, n)}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, joinWait, func() bool { return approveCSRs(t, g) == len(names) }, "a kubelet CSR per machine")
	for _, n := range names {
		node := readyNode(t, g, n)
		if node.Spec.ProviderID != api.ProviderID(g.Name, n) || node.Status.NodeInfo.KubeletVersion != kubeletVersion {
			t.Errorf("node %s: providerID %q, kubelet %q", n, node.Spec.ProviderID, node.Status.NodeInfo.KubeletVersion)
		}
		for l, v := range map[string]string{"pool": poolName, corev1.LabelHostname: n, corev1.LabelOSStable: "linux",
			corev1.LabelArchStable: "amd64", corev1.LabelInstanceTypeStable: api.DefaultInstanceType,
			api.LabelCapacityType: api.CapacityTypeOnDemand} {
			if node.Labels[l] != v {
				t.Errorf("node %s label %s = %q, want %q", n, l, node.Labels[l], v)
			}
		}
		if _, ok := node.Labels["node-role.kubernetes.io/worker"]; ok {
			t.Errorf("node %s set node-role.kubernetes.io/worker on itself, which NodeRestriction forbids", n)
		}
		if node.Annotations[api.AnnotationCurrentConfig] != "hash-1" || len(node.Spec.Taints) == 0 {
			t.Errorf("node %s: annotations %v, taints %v", n, node.Annotations, node.Spec.Taints)
		}
		if node.Status.Allocatable.Pods().Value() != 58 || node.Status.Allocatable.Cpu().Value() != 4 || len(node.Status.Addresses) != 2 {
			t.Errorf("node %s: allocatable %v, addresses %v", n, node.Status.Allocatable, node.Status.Addresses)
		}
		st, err := cl.Get(ctx, g.Name, n)
		if err != nil || st.State != localcloud.StateRunning || st.Boots != 1 || st.ConfigHash != "hash-1" || st.KubeletVersion != kubeletVersion {
			t.Errorf("machine %s: %+v, %v", n, st, err)
		}
	}

	// Pods: one bound by hand, one scheduled; both run, and deleting one ends it.
	pods := g.Admin.CoreV1().Pods("default")
	tolerate := []corev1.Toleration{{Key: testTaint, Operator: corev1.TolerationOpExists}}
	mkPod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: node, Tolerations: tolerate,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		}}
	}
	for _, p := range []*corev1.Pod{mkPod("bound", names[0]), mkPod("scheduled", "")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"bound", "scheduled"} {
		var p *corev1.Pod
		testenv.Eventually(t, joinWait, func() bool {
			p, err = pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		}, "pod %s Running; last %+v, %v", name, p, err)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
		if !ready || p.Status.PodIP == "" || p.Status.HostIP == "" || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].State.Running == nil || !*p.Status.ContainerStatuses[0].Started {
			t.Errorf("pod %s status %+v", name, p.Status)
		}
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, joinWait, func() bool {
		_, err := pods.Get(ctx, "bound", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "a deleted pod is finished by its node")

	// In place: the new config's labels, annotation and kubelet version reach the Node.
	ign.Set(t, "t2", localcloudtest.NodePayload(t, kc, g.REST.CAData, localcloud.KubeletConfig{
		NodeLabels: map[string]string{"pool": poolName, "tier": "gold"}, ConfigHash: "hash-2", KubeletVersion: kubeletVersion + "-p1",
	}))
	if _, err := cl.Reconfigure(ctx, g.Name, names[0], ign.Stub(t, "t2")); err != nil {
		t.Fatal(err)
	}
	var node *corev1.Node
	testenv.Eventually(t, joinWait, func() bool {
		node, err = g.Admin.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
		return err == nil && node.Annotations[api.AnnotationCurrentConfig] == "hash-2"
	}, "node reports the new config; last %v", err)
	if node.Labels["tier"] != "gold" || node.Labels["stale"] != "" || node.Status.NodeInfo.KubeletVersion != kubeletVersion+"-p1" {
		t.Errorf("after the in-place update: labels %v, kubelet %q", node.Labels, node.Status.NodeInfo.KubeletVersion)
	}
	if st, err := cl.Get(ctx, g.Name, names[0]); err != nil || st.ConfigHash != "hash-2" || st.KubeletVersion != kubeletVersion+"-p1" {
		t.Errorf("machine after the in-place update: %+v, %v", st, err)
	}

	// A restart of the cloud: joined machines resume their heartbeats without joining again.
	stop()
	before := leaseRenewed(t, g, names[0])
	cl, _ = runCloud(t, dir, sock)
	testenv.Eventually(t, joinWait, func() bool { return leaseRenewed(t, g, names[0]).After(before) }, "lease renewed after the restart")
	if n := approveCSRs(t, g); n != len(names) {
		t.Errorf("%d kubelet CSRs after the restart, want %d: a joined machine does not join again", n, len(names))
	}
	for _, n := range names {
		if st, err := cl.Get(ctx, g.Name, n); err != nil || st.Boots != 1 || st.State != localcloud.StateRunning {
			t.Errorf("machine %s after restart: %+v, %v; want Running, booted once", n, st, err)
		}
	}

	// StopHeartbeats: the Lease stops moving while the other machine's keeps being renewed.
	if _, err := cl.Fault(ctx, g.Name, names[0], api.FaultStopHeartbeats); err != nil {
		t.Fatal(err)
	}
	waitRenewals(t, g, names[1], 1) // a renewal of workers-a in flight at the fault has landed by now
	silent := leaseRenewed(t, g, names[0])
	waitRenewals(t, g, names[1], 3)
	if got := leaseRenewed(t, g, names[0]); !got.Equal(silent) {
		t.Errorf("lease of %s renewed at %v after StopHeartbeats (was %v)", names[0], got, silent)
	}

	// Delete: the machine goes, the Node stays for Cluster API to delete.
	if err := cl.Delete(ctx, g.Name, names[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(ctx, g.Name, names[1]); !errors.Is(err, localcloud.ErrNotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	if _, err := g.Admin.CoreV1().Nodes().Get(ctx, names[1], metav1.GetOptions{}); err != nil {
		t.Errorf("node of a deleted machine: %v; want it left to Cluster API", err)
	}
}
