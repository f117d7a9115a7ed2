package componentd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestComponentd_SingleReplicaCluster_ComesUpSurvivesRestartAndIsDeletedCleanly(t *testing.T) {
	h := newHarness(t)
	h.StartInfrad()
	h.StartPKID()
	cd := h.startComponentd()

	begin := time.Now()
	h.createCluster("demo", "1.34.4", api.SingleReplica)
	comps := h.waitSettled("demo", "1.34.4")
	t.Logf("all four components Available %v after cluster.created", time.Since(begin).Round(time.Millisecond))

	cs := h.AdminClientset("demo")
	testenv.Eventually(t, wait, func() bool {
		nss, err := cs.CoreV1().Namespaces().List(h.Ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(nss.Items, func(n corev1.Namespace) bool { return n.Name == "kube-system" })
	}, "listing namespaces with the admin kubeconfig")
	if v := h.serverVersion(cs); v != "v1.34.4" {
		t.Errorf("server version %s, want v1.34.4", v)
	}
	for _, name := range componentNames {
		c := comps[name].Value
		if c.Cluster != "demo" || c.Spec.Replicas != 1 || c.Spec.ConfigHash == "" || len(c.Status.Replicas) != 1 ||
			c.Status.Replicas[0].Pid == 0 || c.Status.Replicas[0].ConfigHash != c.Spec.ConfigHash {
			t.Errorf("%s record: %+v", name, c)
		}
	}
	if deps := comps[api.ComponentScheduler].Value.Spec.DependsOn; !slices.Equal(deps, []string{api.ComponentKubeAPIServer}) {
		t.Errorf("kube-scheduler depends on %v", deps)
	}

	// The HTTP API.
	status, _, body := get(t, cd.url+"/v1/clusters/demo/components")
	var list api.ComponentList
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("GET components: %d %s", status, body)
	}
	var names []string
	for _, c := range list.Items {
		names = append(names, c.Name)
	}
	// The process runtime lists the autoscaler too, idle: the cluster has no autoscaled pool.
	if want := append(slices.Clone(componentNames), api.ComponentKarpenter); !slices.Equal(names, want) {
		t.Errorf("GET components lists %v, want %v", names, want)
	}
	for _, c := range list.Items {
		if c.Name == api.ComponentKarpenter && (c.Spec.Replicas != 0 || len(c.Status.Replicas) != 0 || !c.Status.Conditions.IsTrue(api.ConditionAvailable)) {
			t.Errorf("the idle autoscaler: %+v; want 0 replicas and Available", c)
		}
	}
	status, ctype, body := get(t, cd.url+"/v1/clusters/demo/components/kube-apiserver/logs?tail=5")
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") || countLines(body) != 5 {
		t.Errorf("GET logs?tail=5: %d %s, %d lines:\n%s", status, ctype, countLines(body), body)
	}
	for _, path := range []string{"/v1/clusters/demo/components/kube-proxy/logs", "/v1/clusters/nope/components",
		"/v1/clusters/demo/components/etcd/logs?replica=2"} {
		if status, _, body := get(t, cd.url+path); status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, status, body)
		}
	}
	if status, _, _ := get(t, cd.url+"/v1/clusters/demo/components/etcd/logs?tail=x"); status != http.StatusBadRequest {
		t.Errorf("GET logs?tail=x: %d, want 400", status)
	}
	for _, name := range componentNames {
		if v, ok := testenv.Metric(t, cd.reg, "hostplane_component_available", map[string]string{"cluster": "demo", "component": name}); !ok || v != 1 {
			t.Errorf("hostplane_component_available{%s} = %v (%v), want 1", name, v, ok)
		}
	}

	// A componentd restart re-adopts the control plane: same processes, no status change.
	before := pids(comps)
	ticks := map[string]string{}
	for name, pid := range before {
		ticks[name] = startTicks(t, pid)
	}
	cd.stop()
	for name, pid := range before {
		if !testenv.Alive(pid) {
			t.Fatalf("%s (pid %d) did not survive componentd's stop", name, pid)
		}
	}
	cd = h.startComponentd()
	testenv.Eventually(t, wait, func() bool {
		for _, name := range componentNames {
			if v, ok := testenv.Metric(t, cd.reg, "hostplane_component_available", map[string]string{"cluster": "demo", "component": name}); !ok || v != 1 {
				return false
			}
		}
		return true
	}, "the restarted componentd reports every component Available")
	after := h.componentsOf("demo")
	for name, pid := range pids(after) {
		if pid != before[name] || startTicks(t, pid) != ticks[name] {
			t.Errorf("%s: pid %d (started %s) after the restart, want pid %d (started %s)", name, pid, startTicks(t, pid), before[name], ticks[name])
		}
	}
	for _, name := range componentNames {
		if after[name].Revision != comps[name].Revision {
			t.Errorf("%s record rewritten by the restarted componentd (revision %d → %d)", name, comps[name].Revision, after[name].Revision)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Get(h.Ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("API after the restart: %v", err)
	}

	// The restarted componentd supervises what it adopted: a crashed scheduler is restarted
	// and its restart shows in the status.
	schedPid := before["demo-kube-scheduler-0"]
	if err := syscall.Kill(schedPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, wait, func() bool {
		e := h.componentsOf("demo")[api.ComponentScheduler]
		r := e.Value.Status.Replicas[0]
		return r.Pid != 0 && r.Pid != schedPid && r.Restarts >= 1 && r.Ready && e.Value.Status.Conditions.IsTrue(api.ConditionAvailable)
	}, "the killed scheduler restarted and reported")
	if v, _ := testenv.Metric(t, cd.reg, "hostplane_component_restarts_total", map[string]string{"cluster": "demo", "component": api.ComponentScheduler}); v < 1 {
		t.Errorf("hostplane_component_restarts_total{kube-scheduler} = %v, want ≥ 1", v)
	}

	// Deletion leaves no process, file or key.
	all := pids(h.componentsOf("demo"))
	h.MarkClusterDeleting("demo")
	testenv.Eventually(t, wait, func() bool { return len(h.componentsOf("demo")) == 0 }, "controlplane keys of demo deleted")
	for name, pid := range all {
		if testenv.Alive(pid) {
			t.Errorf("%s (pid %d) still runs after deletion", name, pid)
		}
	}
	clusterDir := filepath.Join(h.DataDir, "componentd", "clusters", "demo")
	if left := testenv.ProcessesUnder(clusterDir); len(left) > 0 {
		t.Errorf("processes of demo left: %v", left)
	}
	if _, err := os.Stat(clusterDir); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", clusterDir, err)
	}
	pidfiles, _ := filepath.Glob(filepath.Join(h.DataDir, "componentd", "run", "demo-*"))
	if len(pidfiles) > 0 {
		t.Errorf("pidfiles left: %v", pidfiles)
	}
	if status, _, _ := get(t, cd.url+"/v1/clusters/demo/components"); status != http.StatusNotFound {
		t.Errorf("GET components after deletion: %d, want 404", status)
	}
}

func TestComponentd_ReleaseUpgrade_RollsKubeAPIServerBeforeControllersAndKeepsEtcd(t *testing.T) {
	h := newHarness(t)
	h.StartInfrad()
	h.StartPKID()
	h.startComponentd()

	h.createCluster("up", "1.33.13", api.SingleReplica)
	before := h.waitSettled("up", "1.33.13")
	cs := h.AdminClientset("up")
	if v := h.serverVersion(cs); v != "v1.33.13" {
		t.Fatalf("server version %s, want v1.33.13", v)
	}

	// Every change of the controlplane records, in order.
	ctx, cancel := context.WithCancel(h.Ctx)
	defer cancel()
	watch, err := h.components.Watch(ctx, "up.*", true)
	if err != nil {
		t.Fatal(err)
	}
	type change struct {
		name string
		c    api.ControlPlaneComponent
	}
	changes := make(chan change, 10000)
	go func() {
		for ch := range watch {
			if ch.Value != nil {
				changes <- change{ch.Value.Name, *ch.Value}
			}
		}
	}()

	begin := time.Now()
	h.upgrade("up", "1.34.4")
	after := h.waitSettled("up", "1.34.4")
	t.Logf("upgrade 1.33.13 → 1.34.4 settled after %v", time.Since(begin).Round(time.Millisecond))
	if v := h.serverVersion(cs); v != "v1.34.4" {
		t.Errorf("server version %s after the upgrade, want v1.34.4", v)
	}
	old, now := pids(before), pids(after)
	if old["up-etcd-0"] != now["up-etcd-0"] {
		t.Errorf("etcd restarted on a release upgrade (pid %d → %d)", old["up-etcd-0"], now["up-etcd-0"])
	}
	for _, name := range []string{"up-kube-apiserver-0", "up-kube-controller-manager-0", "up-kube-scheduler-0"} {
		if old[name] == now[name] {
			t.Errorf("%s not replaced on the upgrade (pid %d)", name, now[name])
		}
	}

	// kube-apiserver finished its rollout before kube-controller-manager or kube-scheduler
	// ran a replica of the new config.
	cancel()
	var seq []change
	for done := false; !done; {
		select {
		case ch := <-changes:
			seq = append(seq, ch)
		default:
			done = true
		}
	}
	kasDone := slices.IndexFunc(seq, func(ch change) bool {
		return ch.name == api.ComponentKubeAPIServer && ch.c.Status.Version == "1.34.4" &&
			ch.c.Status.Conditions.IsTrue(api.ConditionRolloutComplete)
	})
	if kasDone < 0 {
		t.Fatal("never saw kube-apiserver complete its rollout")
	}
	for _, name := range []string{api.ComponentControllerManager, api.ComponentScheduler} {
		newHash := after[name].Value.Spec.ConfigHash
		first := slices.IndexFunc(seq, func(ch change) bool {
			return ch.name == name && slices.ContainsFunc(ch.c.Status.Replicas, func(r api.ReplicaStatus) bool { return r.ConfigHash == newHash })
		})
		if first < kasDone {
			t.Errorf("%s ran its new config (change %d) before kube-apiserver completed its rollout (change %d)", name, first, kasDone)
		}
	}
	if after[api.ComponentEtcd].Value.Spec.ConfigHash != before[api.ComponentEtcd].Value.Spec.ConfigHash {
		t.Error("etcd's config hash changed with the release")
	}
}

func TestComponentd_HighlyAvailableCluster_StaysUsableWhenAnAPIServerAndAnEtcdMemberDie(t *testing.T) {
	h := newHarness(t)
	h.StartInfrad()
	h.StartPKID()
	h.startComponentd()

	begin := time.Now()
	h.createCluster("ha", "1.34.4", api.HighlyAvailable)
	comps := h.waitSettled("ha", "1.34.4")
	t.Logf("all four HighlyAvailable components Available %v after cluster.created", time.Since(begin).Round(time.Millisecond))
	want := map[string]int{api.ComponentEtcd: 3, api.ComponentKubeAPIServer: 2, api.ComponentControllerManager: 2, api.ComponentScheduler: 2}
	for name, n := range want {
		if got := len(comps[name].Value.Status.Replicas); got != n || comps[name].Value.Status.ReadyReplicas != n {
			t.Errorf("%s: %d replicas, %d ready; want %d", name, got, comps[name].Value.Status.ReadyReplicas, n)
		}
	}
	cs := h.AdminClientset("ha") // through infrad's load balancer
	if _, err := cs.CoreV1().Namespaces().List(h.Ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list namespaces: %v", err)
	}

	before := pids(comps)
	for _, name := range []string{"ha-kube-apiserver-0", "ha-etcd-0"} {
		if err := syscall.Kill(before[name], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	// Until both are back, reads and writes go on through the other replicas. The kill cuts
	// the connections the dead kube-apiserver held, and when the dead etcd member was the
	// leader, requests time out until the others elect a new one: rounds may fail right after
	// the kill. Once a round succeeds the cluster has failed over, and every later round must
	// succeed too.
	var ok, failedBefore, failedAfter int
	var lastErr error
	deadline := time.Now().Add(upTimeout)
	for i := 0; ; i++ {
		cur := h.componentsOf("ha")
		back := func(comp, name string) bool {
			for _, r := range cur[comp].Value.Status.Replicas {
				if r.Name == name {
					return r.Pid != before[name] && r.Ready
				}
			}
			return false
		}
		// Done once both are back and the cluster has served since the kill: a failover
		// slower than the restart (a leader election on a busy machine) leaves no round
		// while they were down, and then the rounds after their return must succeed.
		if back(api.ComponentKubeAPIServer, "ha-kube-apiserver-0") && back(api.ComponentEtcd, "ha-etcd-0") && i > 0 && ok > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %s the killed replicas did not come back or no round succeeded (%d failed; last error: %v)", upTimeout, failedBefore, lastErr)
		}
		// A write may wait for an etcd leader election on a busy machine: give each round
		// time, so a failure means a request really failed rather than was slow.
		ctx, cancel := context.WithTimeout(h.Ctx, 15*time.Second)
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		}, metav1.CreateOptions{})
		if err == nil {
			_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		}
		cancel()
		switch {
		case err == nil:
			if ok == 0 {
				t.Logf("first successful round %s after the kill", time.Since(killed).Round(time.Millisecond))
			}
			ok++
		case ok == 0:
			failedBefore++
			lastErr = err
		default:
			failedAfter++
			lastErr = err
		}
	}
	t.Logf("after a kube-apiserver and an etcd member were killed: %d rounds failed during the failover, then %d succeeded and %d failed (last error: %v)",
		failedBefore, ok, failedAfter, lastErr)
	if ok == 0 || failedAfter > 0 {
		t.Errorf("after the failover %d rounds succeeded and %d failed; want every round after the first success to succeed", ok, failedAfter)
	}
	h.waitSettled("ha", "1.34.4")
}

func TestComponentd_PKIRotation_RollsEveryComponentOntoTheRenewedCertificates(t *testing.T) {
	h := newHarness(t)
	h.StartInfrad()
	pkidURL := h.StartPKID()
	h.startComponentd()

	h.createCluster("rot", "1.34.4", api.SingleReplica)
	before := h.waitSettled("rot", "1.34.4")
	serving := func() []byte {
		b, err := os.ReadFile(filepath.Join(h.DataDir, "componentd", "clusters", "rot", "pki", "apiserver.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldCert := serving()

	resp, err := http.Post(pkidURL+"/v1/clusters/rot/pki/rotate", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("rotate: %s", resp.Status)
	}
	// A rotation renews every leaf and the Secret encryption key; the key moves in steps
	// (added, active, Secrets rewritten, old key dropped), each a new encryption
	// configuration kube-apiserver rolls onto: wait until pkid finished them all.
	var after map[string]*store.Entry[api.ControlPlaneComponent]
	testenv.Eventually(t, upTimeout, func() bool {
		p, _, err := h.pki.Get(h.Ctx, "rot")
		if err != nil || (p.SecretEncryption != nil && (p.SecretEncryption.Rotation != nil || len(p.SecretEncryption.Keys) != 1)) {
			return false
		}
		after = h.componentsOf("rot")
		if !settled(after, "1.34.4") {
			return false
		}
		for _, name := range componentNames {
			if after[name].Value.Spec.ConfigHash == before[name].Value.Spec.ConfigHash {
				return false
			}
		}
		return true
	}, "every component rolled onto the renewed certificates")
	old, now := pids(before), pids(after)
	for name, pid := range now {
		if pid == old[name] {
			t.Errorf("%s not restarted after the rotation (pid %d)", name, pid)
		}
	}
	if bytes.Equal(serving(), oldCert) {
		t.Error("the serving certificate file was not rewritten")
	}
	// The admin kubeconfig works on the renewed certificates (a SingleReplica apiserver's
	// last roll, onto the final encryption configuration, may still be ending).
	cs := h.AdminClientset("rot")
	for deadline := time.Now().Add(upTimeout); ; time.Sleep(200 * time.Millisecond) {
		_, err := cs.CoreV1().Namespaces().List(h.Ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list namespaces after the rotation: %v", err)
		}
	}
}
