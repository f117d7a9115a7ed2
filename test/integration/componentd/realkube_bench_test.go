package componentd_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// rssIdle is how long a control plane idles after it became Available before its resident
// memory is read (bench's BenchmarkIdleControlPlaneRSS waits as long).
const rssIdle = 10 * time.Second

// BenchmarkCreateToAvailable_KubernetesRuntimeBesideProcess measures, in one run, create →
// every component Available of a SingleReplica control plane of the newest release under
// componentd's two runtimes, one after the other in each iteration so both see the same
// machine:
//
//   - process: a componentd on the process runtime starts the control plane as processes;
//   - kubernetes: a componentd on the kubernetes runtime applies it to the real management
//     cluster of kubelet nodes (started once, outside the timer, its images imported before),
//     Available once its pods are Ready.
//
// Both wait as the tests do (waitSettled: every component Available and RolloutComplete with
// every replica ready); each cluster is then deleted, outside the timer, until its processes
// or its namespace are gone. Each iteration logs when each pod was created, scheduled, had
// its sandbox, started and became Ready (podTimeline). The first iteration also reads, after
// rssIdle, the resident memory of both control planes: VmRSS and RssAnon summed over the
// processes (the process runtime's replica pids; every process in the pods' cgroups, pause
// included), and the pods' cgroup memory.stat (total_rss: anonymous memory, no file pages),
// as the tests log it.
//
// It needs root and a real management cluster: make bench-kuberuntime
// (HOSTPLANE_MGMT_KUBERUNTIME_TEST=1 -benchtime 3x). Each iteration's etcd takes one of the
// management cluster's 7 volumes, which are retained: at most 7 iterations.
func BenchmarkCreateToAvailable_KubernetesRuntimeBesideProcess(b *testing.B) {
	mc := realManagementCluster(b)
	rel := release.Latest()
	ctx := b.Context()

	hp := newHarnessFor(b, rel.Version)
	hp.StartInfrad()
	hp.StartPKID()
	hp.startComponentd()
	// newRealKubeHarness deletes the first cluster's namespace when the benchmark ends; every
	// iteration deletes its own cluster and waits until its namespace is gone, and TestMain
	// stops the management cluster after a failed run.
	kubeName := func(i int) string { return "bench-kube-" + strconv.Itoa(i) }
	hk, cs := newRealKubeHarness(b, mc, kubeName(1), rel.Version)

	var procTotal, kubeTotal time.Duration
	described := false
	i := 0
	for b.Loop() {
		i++
		b.StopTimer()
		if err := requireFreeVolume(ctx, cs); err != nil {
			b.Fatalf("iteration %d: %v", i, err)
		}
		b.StartTimer()

		proc := "bench-proc-" + strconv.Itoa(i)
		begin := time.Now()
		hp.createCluster(proc, rel.Version, api.SingleReplica)
		hp.waitSettled(proc, rel.Version)
		procTook := time.Since(begin)
		b.StopTimer()
		if i == 1 {
			logProcessRSS(b, hp, proc)
		}
		deleted := time.Now()
		hp.MarkClusterDeleting(proc)
		clusterDir := filepath.Join(hp.DataDir, "componentd", "clusters", proc)
		testenv.Eventually(b, upTimeout, func() bool {
			return len(hp.componentsOf(proc)) == 0 && len(testenv.ProcessesUnder(clusterDir)) == 0
		}, "%s's records and processes gone", proc)
		procGone := time.Since(deleted)
		b.StartTimer()

		kube := kubeName(i)
		begin = time.Now()
		hk.createCluster(kube, rel.Version, api.SingleReplica)
		hk.waitSettled(kube, rel.Version)
		kubeTook := time.Since(begin)
		b.StopTimer()
		ns := kuberuntime.Namespace(kube)
		line, restarts, err := podTimeline(ctx, cs, ns, begin)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("iteration %d: kubernetes runtime, each pod since create: %s", i, line)
		if restarts > 0 && !described {
			// Why a container restarted, the first time: the pods' last log lines, to stderr
			// (the testing package keeps only 10 lines of a benchmark's log).
			fmt.Fprintf(os.Stderr, "iteration %d: a control-plane container restarted; the pods:\n%s", i, mc.DescribePods(ctx, ns, 4))
			described = true
		}
		if i == 1 {
			logPodsRSS(ctx, b, cs, ns)
		}
		deleted = time.Now()
		hk.MarkClusterDeleting(kube)
		waitUntil(ctx, b, ns+" gone", func(ctx context.Context) (bool, string, error) {
			if n := len(hk.componentsOf(kube)); n > 0 {
				return false, fmt.Sprintf("%d records left", n), nil
			}
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			_, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			return false, fmt.Sprintf("%d pods left", len(pods.Items)), err
		})
		kubeGone := time.Since(deleted)
		b.StartTimer()

		procTotal += procTook
		kubeTotal += kubeTook
		b.Logf("iteration %d: create → Available: process runtime %s, kubernetes runtime %s (%.2f×); delete → gone: %s, %s (namespace)",
			i, procTook.Round(time.Millisecond), kubeTook.Round(time.Millisecond), kubeTook.Seconds()/procTook.Seconds(),
			procGone.Round(time.Millisecond), kubeGone.Round(time.Millisecond))
	}
	procMean, kubeMean := procTotal.Seconds()/float64(i), kubeTotal.Seconds()/float64(i)
	b.ReportMetric(procMean, "process_s/op")
	b.ReportMetric(kubeMean, "kuberuntime_s/op")
	b.ReportMetric(kubeMean/procMean, "kuberuntime/process")
}

// podTimeline says, for each control-plane pod of ns, when it was created, scheduled, had its
// sandbox and network (PodReadyToStartContainers), last started its container and became
// Ready, counted from begin in whole seconds (the API's timestamps), its restarts and its
// container's last exit; and how many restarts there were in all.
func podTimeline(ctx context.Context, cs kubernetes.Interface, ns string, begin time.Time) (_ string, restarts int, _ error) {
	byComponent, err := controlPlanePods(ctx, cs, ns)
	if err != nil {
		return "", 0, err
	}
	at := func(t metav1.Time) string { return fmt.Sprintf("%+.0fs", t.Sub(begin).Seconds()) }
	var pods []string
	for _, comp := range componentNames {
		for _, p := range byComponent[comp] {
			steps := []string{"created " + at(p.CreationTimestamp)}
			for _, want := range []struct {
				cond corev1.PodConditionType
				name string
			}{{corev1.PodScheduled, "scheduled"}, {corev1.PodReadyToStartContainers, "sandbox"}} {
				for _, c := range p.Status.Conditions {
					if c.Type == want.cond && c.Status == corev1.ConditionTrue {
						steps = append(steps, want.name+" "+at(c.LastTransitionTime))
					}
				}
			}
			for _, c := range p.Status.ContainerStatuses {
				if last := c.LastTerminationState.Terminated; last != nil {
					steps = append(steps, fmt.Sprintf("last exit %d at %s", last.ExitCode, at(last.FinishedAt)))
					restarts += int(c.RestartCount)
				}
				if c.State.Running != nil {
					steps = append(steps, fmt.Sprintf("started %s (%d restarts)", at(c.State.Running.StartedAt), c.RestartCount))
				}
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					steps = append(steps, "Ready "+at(c.LastTransitionTime))
				}
			}
			pods = append(pods, comp+": "+strings.Join(steps, ", "))
		}
	}
	return strings.Join(pods, "; "), restarts, nil
}

// requireFreeVolume fails when no PersistentVolume is left for the next cluster's etcd.
func requireFreeVolume(ctx context.Context, cs kubernetes.Interface) error {
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.Status.Phase == corev1.VolumeAvailable {
			return nil
		}
	}
	return fmt.Errorf("no Available PersistentVolume left of %d for etcd (each iteration takes one)", len(pvs.Items))
}

// logProcessRSS reports, after rssIdle, the resident memory of cluster's processes under the
// process runtime (its replicas' pids).
func logProcessRSS(b *testing.B, h *harness, cluster string) {
	b.Helper()
	time.Sleep(rssIdle) // idling is what is measured, not a synchronisation
	var procs []string
	for _, pid := range pids(h.componentsOf(cluster)) {
		procs = append(procs, strconv.Itoa(pid))
	}
	rss, anon, err := processesRSS(procs)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("process runtime: resident memory of the control plane's %d processes %s after Available: VmRSS %.0f MiB, RssAnon %.0f MiB",
		len(procs), rssIdle, mib(rss), mib(anon))
	b.ReportMetric(mib(rss), "process_VmRSS_MiB")
	b.ReportMetric(mib(anon), "process_RssAnon_MiB")
}

// logPodsRSS reports, after rssIdle, the resident memory of ns's control-plane pods: their
// cgroups' (podsRSS), and VmRSS and RssAnon summed over every process in them.
func logPodsRSS(ctx context.Context, b *testing.B, cs kubernetes.Interface, ns string) {
	b.Helper()
	time.Sleep(rssIdle) // idling is what is measured, not a synchronisation
	byComponent, err := controlPlanePods(ctx, cs, ns)
	if err != nil {
		b.Fatal(err)
	}
	var pods []corev1.Pod
	for _, comp := range componentNames {
		pods = append(pods, byComponent[comp]...)
	}
	cgroupRSS, n, err := podsRSS(pods)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := podProcesses(pods)
	if err != nil {
		b.Fatal(err)
	}
	rss, anon, err := processesRSS(pids)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("kubernetes runtime: resident memory of the control plane's %d pods %s after Available: cgroup memory.stat total_rss %.0f MiB; their %d processes (pause included) VmRSS %.0f MiB, RssAnon %.0f MiB",
		n, rssIdle, float64(cgroupRSS)/(1<<20), len(pids), mib(rss), mib(anon))
	b.ReportMetric(float64(cgroupRSS)/(1<<20), "kuberuntime_cgroup_rss_MiB")
	b.ReportMetric(mib(rss), "kuberuntime_VmRSS_MiB")
	b.ReportMetric(mib(anon), "kuberuntime_RssAnon_MiB")
}

// podProcesses returns the pids in pods' cgroups: the pod's and its containers' below it.
func podProcesses(pods []corev1.Pod) ([]string, error) {
	var pids []string
	for _, p := range pods {
		dir, err := podCgroup(p)
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return err
			}
			b, err := os.ReadFile(path)
			pids = append(pids, strings.Fields(string(b))...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
	}
	return pids, nil
}

// processesRSS sums VmRSS and RssAnon of pids in KiB; a process gone meanwhile counts 0.
func processesRSS(pids []string) (rss, anon int64, _ error) {
	for _, pid := range pids {
		r, err := testenv.ProcKiB(pid, "status", "VmRSS")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		a, err := testenv.ProcKiB(pid, "status", "RssAnon")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, err
		}
		rss, anon = rss+r, anon+a
	}
	return rss, anon, nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
