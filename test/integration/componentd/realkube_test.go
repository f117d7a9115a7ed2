package componentd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// EnvRealKubeTest runs TestComponentd_KubernetesRuntime_OnRealKubelets (make
// mgmt-kuberuntime-test, which make test runs after the other tests: it needs what make
// mgmt-test needs, and the management cluster's fixed names and addresses admit one cluster at
// a time).
const EnvRealKubeTest = "HOSTPLANE_MGMT_KUBERUNTIME_TEST"

// The kubernetes runtime on a management cluster whose kubelets run the pods: one hosted
// control plane (SingleReplica, the newest release) from images built FROM scratch around the
// cached release binaries, settled when its pods are really Ready.
func TestComponentd_KubernetesRuntime_OnRealKubelets_ControlPlanePodsBecomeAvailable(t *testing.T) {
	if os.Getenv(EnvRealKubeTest) == "" {
		t.Skip("needs root and a real management cluster: run `make mgmt-kuberuntime-test`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rel := release.Latest()
	archives := releaseImages(ctx, t, rel)
	cfg := mgmtcluster.Config{}
	begin := time.Now()
	mc, err := mgmtcluster.Start(ctx, cfg, archives...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer scancel()
		if err := mc.Stop(sctx); err != nil {
			t.Errorf("stop the management cluster: %v", err)
		}
	})
	if err := mc.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mc.AddHostPathVolumes(ctx, 3, "10Gi"); err != nil {
		t.Fatal(err)
	}
	t.Logf("management cluster with 2 kubelet nodes Ready in %s", time.Since(begin).Round(time.Millisecond))
	cs, err := mc.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	h := newHarnessFor(t, rel.Version)
	h.StartInfrad()
	h.StartPKID()
	h.startComponentdWith(componentd.Config{Runtime: componentd.RuntimeKubernetes, Base: daemon.Base{ManagementKubeconfig: mc.KubeconfigPath}})
	created := time.Now()
	h.createCluster("real", rel.Version, api.SingleReplica)
	ns := kuberuntime.Namespace("real")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Logf("pods: %v", err)
			return
		}
		for _, p := range pods.Items {
			var states []string
			for _, c := range p.Status.ContainerStatuses {
				states = append(states, fmt.Sprintf("%s ready=%v restarts=%d %+v", c.Name, c.Ready, c.RestartCount, c.State))
			}
			t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(states, "; "))
			for _, c := range p.Spec.Containers {
				logs, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: true, TailLines: ptr.To[int64](15)}).DoRaw(context.Background())
				t.Logf("--- %s/%s previous log (%v) ---\n%s", p.Name, c.Name, err, logs)
			}
		}
	})
	h.waitSettled("real", rel.Version)
	t.Logf("hosted control plane settled (every component Available from Ready pods) %s after create", time.Since(created).Round(time.Millisecond))
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Logf("pod %s on %s at %s: %s", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase)
	}
}

// releaseImages packs the cached release binaries into FROM-scratch images named as the
// release names them, so pods find them without a pull.
func releaseImages(ctx context.Context, t *testing.T, rel release.Release) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, comp := range release.Components() {
		bin, err := rel.Binary(comp)
		if err != nil {
			t.Fatal(err)
		}
		img := mgmtcluster.Image{
			Ref:   rel.Images[comp],
			Files: []mgmtcluster.ImageFile{{Path: "/usr/local/bin/" + comp, Source: bin}},
			Env:   []string{"PATH=/usr/local/bin"},
		}
		archive := filepath.Join(dir, comp+".tar")
		if err := img.WriteArchive(archive); err != nil {
			t.Fatal(err)
		}
		out = append(out, archive)
	}
	_ = ctx
	return out
}
