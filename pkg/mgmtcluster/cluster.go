package mgmtcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// Cluster is a running management cluster.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	state hostState
	bins  binaries
	sup   *process.Supervisor
	kube  *localkube.Cluster
	// Kubeconfig and KubeconfigPath: an admin kubeconfig for the management apiserver.
	Kubeconfig     []byte
	KubeconfigPath string
	nodes          []*Node
	scheduler      *process.Process
	images         string
	dns            *dnsServer
	stopDNS        context.CancelFunc
}

// Controllers the management kube-controller-manager runs: workloads (Jobs too, and the
// clean-up of finished ones), node lifecycle and
// taint eviction (node loss), service accounts and the root CA ConfigMap (every pod's
// projected token volume needs both), garbage collection, namespaces.
var Controllers = []string{
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"job-controller", "ttl-after-finished-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
	"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"garbage-collector-controller", "namespace-controller",
	"endpointslice-controller", "endpoints-controller", "disruption-controller",
	"persistentvolume-binder-controller", "persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
}

const cniBinDir = "/usr/lib/cni"

type binaries struct {
	kubelet, scheduler, containerd, ctr, nsenter string
}

// findBinaries checks every program the cluster runs and says how to get a missing one.
func findBinaries(r release.Release) (binaries, error) {
	var b binaries
	var problems []string
	look := func(name, hint string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			problems = append(problems, name+" is not on PATH ("+hint+")")
		}
		return p
	}
	b.containerd = look("containerd", "apt-get install containerd")
	b.ctr = look("ctr", "apt-get install containerd")
	b.nsenter = look("nsenter", "apt-get install util-linux")
	look("runc", "apt-get install runc")
	look("ip", "apt-get install iproute2")
	look("iptables", "apt-get install iptables")
	look("go", "the tests build static images")
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			problems = append(problems, "CNI plugin "+filepath.Join(cniBinDir, p)+" is missing (make mgmt-tools, or apt-get install containernetworking-plugins)")
		}
	}
	b.kubelet = KubeletPath(r)
	if fi, err := os.Stat(b.kubelet); err != nil || fi.Mode().Perm()&0o111 == 0 {
		problems = append(problems, fmt.Sprintf("no kubelet at %s (make kubelet, or tools/k8s-bins/kubelet.sh %s)", b.kubelet, r.Version))
	}
	var err error
	if b.scheduler, err = r.Binary(release.KubeScheduler); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return b, fmt.Errorf("%w: %s", ErrMissing, strings.Join(problems, "; "))
	}
	return b, nil
}

// KubeletPath is where tools/k8s-bins/kubelet.sh puts release r's kubelet.
func KubeletPath(r release.Release) string {
	return filepath.Join(release.CacheDir(), "releases", "v"+r.Version, "kubelet")
}

// Start undoes whatever an earlier run with the same Dir left behind, then brings up the
// management apiserver (etcd, kube-apiserver, kube-controller-manager), a kube-scheduler and
// cfg.Nodes nodes, each with its containerd and kubelet, and returns without waiting for the
// nodes to be Ready (WaitNodesReady). images are archives (Image.WriteArchive, docker save)
// imported into every node before its kubelet starts. On failure it tears down what it made.
func Start(ctx context.Context, cfg Config, images ...string) (_ *Cluster, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	c := &Cluster{cfg: cfg, log: cfg.Log.With("component", "mgmtcluster", "name", cfg.Name)}
	if c.bins, err = findBinaries(cfg.Release); err != nil {
		return nil, err
	}
	if err := Cleanup(ctx, cfg); err != nil {
		return nil, fmt.Errorf("leftovers of an earlier run: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if c.state, err = recordHost(cfg.Name); err != nil {
		return nil, err
	}
	c.state.Keep = cfg.kept()
	if err := saveState(cfg.Dir, c.state); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if terr := c.Stop(stopCtx); terr != nil {
				c.log.Warn("teardown after a failed start", "err", terr)
			}
		}
	}()

	if err := setupNetwork(cfg.Name, cfg.Nodes); err != nil {
		return c, fmt.Errorf("network: %w", err)
	}
	c.images = filepath.Join(cfg.Dir, "images")
	if err := os.MkdirAll(c.images, 0o755); err != nil {
		return c, err
	}
	pause, err := buildPause(ctx, c.images)
	if err != nil {
		return c, fmt.Errorf("pause image: %w", err)
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	return c, c.startNodes(ctx, append([]string{pause}, images...))
}

// startControlPlane starts the management apiserver (localkube: etcd, kube-apiserver,
// kube-controller-manager with Controllers), a kube-scheduler and the cluster's DNS server.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	cfg := c.cfg
	var err error
	if c.sup, err = process.NewSupervisor(filepath.Join(cfg.Dir, "run"), c.log); err != nil {
		return err
	}
	seconds := func(d time.Duration) string { return strconv.Itoa(int(d.Round(time.Second) / time.Second)) }
	c.kube, err = localkube.Start(ctx, localkube.Config{
		Dir:           filepath.Join(cfg.Dir, apiserverDir),
		Release:       cfg.Release,
		Host:          hostIP,
		APIServerPort: cfg.APIServerPort,
		Supervisor:    c.sup,
		Name:          cfg.Name,
		ExtraAPIServerArgs: []string{
			"--default-not-ready-toleration-seconds=" + seconds(cfg.EvictAfter),
			"--default-unreachable-toleration-seconds=" + seconds(cfg.EvictAfter),
		},
		Controllers: Controllers,
		ExtraControllerManagerArgs: []string{
			"--node-monitor-period=2s",
			"--node-monitor-grace-period=" + cfg.NodeMonitorGracePeriod.String(),
			"--root-ca-file=" + filepath.Join(cfg.Dir, apiserverDir, "pki", "ca.crt"),
		},
		ReadyTimeout: cfg.ReadyTimeout,
		Log:          cfg.Log,
	})
	if err != nil {
		return err
	}
	c.Kubeconfig, c.KubeconfigPath = c.kube.Kubeconfig, c.kube.KubeconfigPath
	if c.scheduler, err = c.startProcess(ctx, process.Spec{
		Name:    cfg.Name + "-kube-scheduler",
		Path:    c.bins.scheduler,
		Args:    []string{"--kubeconfig=" + c.KubeconfigPath, "--leader-elect=false", "--secure-port=0"},
		LogFile: filepath.Join(cfg.Dir, "kube-scheduler.log"),
	}); err != nil {
		return err
	}
	cs, err := c.kube.Clientset()
	if err != nil {
		return err
	}
	dnsCtx, stopDNS := context.WithCancel(context.WithoutCancel(ctx))
	c.stopDNS = stopDNS
	if c.dns, err = startDNS(dnsCtx, cs, net.JoinHostPort(hostIP, "53")); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	return nil
}

// startNodes starts cfg.Nodes nodes side by side (importing the images into each node's
// containerd is most of a start), each with images imported before its kubelet starts.
func (c *Cluster) startNodes(ctx context.Context, images []string) error {
	for i := 1; i <= c.cfg.Nodes; i++ {
		c.nodes = append(c.nodes, c.newNode(i))
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			if err := c.startNode(ctx, n, images); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startProcess starts spec under the cluster's supervisor and waits for its probe; a failure
// quotes the end of its log.
func (c *Cluster) startProcess(ctx context.Context, spec process.Spec) (*process.Process, error) {
	p, err := c.sup.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	if err := p.WaitReady(wctx); err != nil {
		return p, fmt.Errorf("%s not ready: %w\n--- end of %s ---\n%s", spec.Name, err, spec.LogFile, tailFile(spec.LogFile, 40))
	}
	return p, nil
}

// Cleanup undoes whatever a run of cfg left on the host (after a crash, or a test binary
// killed mid-run). Without a state file from such a run it does nothing.
func Cleanup(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	st, ok, err := loadState(cfg.Dir)
	if err != nil {
		return err
	}
	if !ok {
		// A run that stopped before writing its state changed nothing outside Dir yet, but
		// may have left processes and mounts under it.
		if _, err := os.Stat(cfg.Dir); err != nil {
			return nil
		}
		return errors.Join(killLeftovers(ctx, cfg.Dir, cfg.Name), unmountUnder(cfg.Dir), removeAllBut(cfg.Dir, cfg.kept()))
	}
	cfg.Log.Info("undoing an earlier run's leftovers", "dir", cfg.Dir)
	return teardown(ctx, cfg.Log, cfg.Dir, st)
}

// Stop stops every process and undoes every change the cluster made on the host.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	if c.dns != nil {
		c.stopDNS()
		errs = append(errs, c.dns.Close())
	}
	if c.sup != nil {
		// Kubelets first (they would restart containers), then containerds, then the rest.
		for _, n := range c.nodes {
			if n.kubelet != nil {
				errs = append(errs, n.kubelet.Stop(ctx))
			}
		}
		for _, n := range c.nodes {
			if n.containerd != nil {
				errs = append(errs, n.containerd.Stop(ctx))
			}
		}
		errs = append(errs, c.sup.StopAll(ctx), c.sup.Close())
	}
	errs = append(errs, teardown(ctx, c.log, c.cfg.Dir, c.state))
	return errors.Join(errs...)
}

// Nodes returns the cluster's nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Clientset returns an admin client of the management apiserver.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) { return c.kube.Clientset() }

// APIServer returns the management apiserver (localkube) with its URL, CA and REST config.
func (c *Cluster) APIServer() *localkube.Cluster { return c.kube }

// Resolver resolves names as the cluster's pods do, through the cluster DNS (dns.go): for a
// client on the host that dials a Service name ("<svc>.<ns>.svc"), as a user's machine whose
// DNS forwards the cluster's domain would.
func (c *Cluster) Resolver() *net.Resolver {
	addr := c.dns.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// ImportImages imports image archives (Image.WriteArchive, docker save) into every node's
// containerd, the nodes side by side as in Start.
func (c *Cluster) ImportImages(ctx context.Context, archives ...string) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			for _, a := range archives {
				if err := n.importImage(ctx, c.bins.ctr, a); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// StopKubelet stops node i's kubelet (1-based); its containers keep running, as on a node
// whose kubelet died.
func (c *Cluster) StopKubelet(ctx context.Context, i int) error {
	return c.nodes[i-1].kubelet.Stop(ctx)
}

// StartKubelet starts node i's kubelet again.
func (c *Cluster) StartKubelet(ctx context.Context, i int) error {
	n := c.nodes[i-1]
	p, err := c.startProcess(ctx, n.kubeletSpec)
	if err == nil {
		n.kubelet = p
	}
	return err
}

// WaitNodesReady waits until every node is registered and Ready.
func (c *Cluster) WaitNodesReady(ctx context.Context) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, n := range list.Items {
			if NodeReady(&n) == corev1.ConditionTrue {
				ready++
			}
		}
		last = fmt.Sprintf("%d of %d nodes registered, %d Ready", len(list.Items), len(c.nodes), ready)
		return ready == len(c.nodes), nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready (%s): %w\n%s", last, err, c.kubeletLogs())
	}
	return nil
}

// WaitNodeReady waits until the Ready condition of the node called name is True (ready) or
// anything else: False, Unknown or missing (not ready).
func (c *Cluster) WaitNodeReady(ctx context.Context, name string, ready bool) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		st := NodeReady(n)
		last = "Ready=" + string(st)
		return (st == corev1.ConditionTrue) == ready, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not ready=%v (%s): %w", name, ready, last, err)
	}
	return nil
}

// NodeNamed returns the node called name, or nil.
func (c *Cluster) NodeNamed(name string) *Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) kubeletLogs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- end of %s's kubelet.log ---\n%s\n", n.Name, tailFile(filepath.Join(n.Dir, "kubelet.log"), 20))
	}
	return b.String()
}

// NodeReady returns the status of a Node's Ready condition ("" when it has none).
func NodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// tailFile returns about the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
