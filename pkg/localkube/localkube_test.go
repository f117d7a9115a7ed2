package localkube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func newSupervisor(t *testing.T, dir string) *process.Supervisor {
	t.Helper()
	sup, err := process.NewSupervisor(dir, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	return sup
}

func start(t *testing.T, cfg localkube.Config) *localkube.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := localkube.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %s (etcd pid %d adopted=%v, kube-apiserver pid %d adopted=%v)", time.Since(begin).Round(time.Millisecond),
		c.Etcd().Status().Pid, c.Etcd().Status().Adopted, c.APIServer().Status().Pid, c.APIServer().Status().Adopted)
	return c
}

func clientset(t *testing.T, c *localkube.Cluster) *kubernetes.Clientset {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestStart_WhenSupervisorRestarts_ReadoptsTheSameProcesses is what a restarting daemon
// does: close its supervisor without stopping anything, start again on the same Dir.
func TestStart_WhenSupervisorRestarts_ReadoptsTheSameProcesses(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer)
	dir := t.TempDir()
	runDir, kubeDir := filepath.Join(dir, "run"), filepath.Join(dir, "kube")

	sup1 := newSupervisor(t, runDir)
	first := start(t, localkube.Config{Dir: kubeDir, Supervisor: sup1})
	etcdPid, apiPid := first.Etcd().Status().Pid, first.APIServer().Status().Pid
	t.Cleanup(func() { waitGone(t, etcdPid, apiPid) })
	cs := clientset(t, first)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sup1.Close(); err != nil {
		t.Fatal(err)
	}
	if !alive(etcdPid) || !alive(apiPid) {
		t.Fatal("closing the supervisor stopped the processes")
	}

	sup2 := newSupervisor(t, runDir)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sup2.StopAll(ctx); err != nil {
			t.Errorf("StopAll: %v", err)
		}
	})
	second := start(t, localkube.Config{Dir: kubeDir, Supervisor: sup2})
	for _, tc := range []struct {
		name string
		p    *process.Process
		pid  int
	}{{"etcd", second.Etcd(), etcdPid}, {"kube-apiserver", second.APIServer(), apiPid}} {
		st := tc.p.Status()
		if st.Pid != tc.pid || !st.Adopted {
			t.Errorf("%s: pid %d adopted=%v, want the running pid %d re-adopted", tc.name, st.Pid, st.Adopted, tc.pid)
		}
	}
	if second.URL != first.URL || !bytes.Equal(second.Kubeconfig, first.Kubeconfig) {
		t.Errorf("the restart changed the URL or the credentials: %s vs %s", second.URL, first.URL)
	}
	if _, err := clientset(t, second).CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace through the re-adopted apiserver: %v", err)
	}
}

// TestCluster_Stop_ThenStartResumesTheData stops the cluster and starts it again: new
// processes, same ports, same data.
func TestCluster_Stop_ThenStartResumesTheData(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer)
	dir := t.TempDir()
	kubeDir := filepath.Join(dir, "kube")
	sup := newSupervisor(t, filepath.Join(dir, "run"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sup.StopAll(ctx); err != nil {
			t.Errorf("StopAll: %v", err)
		}
		_ = sup.Close()
	})

	first := start(t, localkube.Config{Dir: kubeDir, Supervisor: sup})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := clientset(t, first).CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcdPid, apiPid := first.Etcd().Status().Pid, first.APIServer().Status().Pid
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitGone(t, etcdPid, apiPid)

	second := start(t, localkube.Config{Dir: kubeDir, Supervisor: sup})
	if second.Etcd().Status().Adopted || second.APIServer().Status().Adopted {
		t.Error("processes after a Stop were re-adopted, want fresh ones")
	}
	if second.URL != first.URL {
		t.Errorf("URL changed from %s to %s", first.URL, second.URL)
	}
	got, err := clientset(t, second).CoreV1().ConfigMaps("default").Get(t.Context(), "kept", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("config map after restart: %v, %v", got, err)
	}
}

func TestStart_WhenAPIServerCannotStart_ReportsItsLog(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer)
	dir := t.TempDir()
	sup := newSupervisor(t, filepath.Join(dir, "run"))
	t.Cleanup(func() { _ = sup.StopAll(context.Background()); _ = sup.Close() })
	// Without a deadline shorter than ReadyTimeout: the crash loop must end the wait.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := localkube.Start(ctx, localkube.Config{
		Dir: filepath.Join(dir, "kube"), Supervisor: sup,
		ExtraAPIServerArgs: []string{"--no-such-flag"},
	})
	if !errors.Is(err, localkube.ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
	t.Logf("Start failed as it should:\n%v", err)
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not quote the log naming the bad flag:\n%v", err)
	}
	if n := len(sup.List()); n != 0 {
		t.Errorf("%d processes still supervised after a failed Start: %+v", n, sup.List())
	}
}

func TestStart_WhenBinaryMissing_SaysHowToBuildIt(t *testing.T) {
	t.Setenv("HOSTPLANE_CACHE_DIR", t.TempDir())
	sup := newSupervisor(t, t.TempDir())
	t.Cleanup(func() { _ = sup.Close() })
	_, err := localkube.Start(t.Context(), localkube.Config{Dir: t.TempDir(), Supervisor: sup})
	if !errors.Is(err, release.ErrBinaryMissing) || !strings.Contains(err.Error(), "make k8s-bins") {
		t.Fatalf("err = %v, want ErrBinaryMissing with build instructions", err)
	}
}

// alive reports whether pid runs; a zombie (exited, not yet reaped) does not count.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("pid %d still running", pid)
				break
			}
			<-time.After(50 * time.Millisecond)
		}
	}
}

// TestStart_WithManagementControllers_CollectsOrphansAndRemovesNamespaces: with the
// management controllers, an object whose owner is deleted goes with it (Cluster API's
// infrastructure machine owned by its MachineSet), and a deleted namespace is emptied and
// removed instead of staying Terminating.
func TestStart_WithManagementControllers_CollectsOrphansAndRemovesNamespaces(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer, release.KubeControllerManager)
	dir := t.TempDir()
	sup := newSupervisor(t, filepath.Join(dir, "run"))
	c := start(t, localkube.Config{Dir: filepath.Join(dir, "kube"), Supervisor: sup, Controllers: localkube.ManagementControllers})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Stop(ctx)
	})
	if c.ControllerManager() == nil {
		t.Fatal("no kube-controller-manager runs with Controllers set")
	}
	cs := clientset(t, c)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := cs.CoreV1().ConfigMaps("tenant").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	if _, err := cs.CoreV1().ConfigMaps("tenant").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("tenant").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		_, err := cs.CoreV1().ConfigMaps("tenant").Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the ConfigMap whose owner was deleted is still there: no garbage collector")

	if _, err := cs.CoreV1().ConfigMaps("tenant").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "tenant", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "tenant", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the deleted namespace is still there: no namespace controller")
}

// TestStop_KubeAPIServerWithWatchesOpenExitsAtSIGTERM: clients' watches do not keep a
// stopping kube-apiserver alive until the supervisor kills it (kube.WatchTerminationGraceArg),
// which is what a restart of the management apiserver, and every roll of a hosted one, waited.
func TestStop_KubeAPIServerWithWatchesOpenExitsAtSIGTERM(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Etcd, release.KubeAPIServer)
	dir := t.TempDir()
	var logs testenv.SyncBuffer
	sup, err := process.NewSupervisor(filepath.Join(dir, "run"), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, localkube.Config{Dir: dir, Supervisor: sup})
	t.Cleanup(func() { _ = c.Stop(context.WithoutCancel(t.Context())) })
	cs := clientset(t, c)
	for range 3 {
		w, err := cs.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	begin := time.Now()
	if err := c.APIServer().Stop(t.Context()); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver with 3 watches open stopped in %s", time.Since(begin).Round(time.Millisecond))
	if strings.Contains(logs.String(), "SIGKILL") {
		t.Errorf("kube-apiserver had to be killed: its open watches kept it running after SIGTERM:\n%s", logs.String())
	}
}
