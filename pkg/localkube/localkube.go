package localkube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// etcdHost is where etcd listens: plain HTTP, so loopback only.
const etcdHost = "127.0.0.1"

// Cluster is a running local etcd + kube-apiserver.
type Cluster struct {
	// Kubeconfig is an admin kubeconfig (client certificate in group system:masters); it is
	// also written to KubeconfigPath.
	Kubeconfig     []byte
	KubeconfigPath string
	// URL is kube-apiserver's https URL.
	URL string
	// RESTConfig is Kubeconfig's client configuration.
	RESTConfig *rest.Config
	// CAPEM is the CA of the serving and client certificates.
	CAPEM []byte
	// EtcdURL is etcd's client URL (plain HTTP on loopback).
	EtcdURL string
	// Release runs the cluster; Dir holds its state.
	Release release.Release
	Dir     string

	etcd, apiserver, controllerManager *process.Process
	cfg                                Config // what Start ran with, for Restart
}

// Etcd returns the supervised etcd process.
func (c *Cluster) Etcd() *process.Process { return c.etcd }

// APIServer returns the supervised kube-apiserver process.
func (c *Cluster) APIServer() *process.Process { return c.apiserver }

// Clientset returns a typed admin client.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(rest.CopyConfig(c.RESTConfig))
}

// ControllerManager returns the supervised kube-controller-manager process, nil when
// Config.Controllers is empty.
func (c *Cluster) ControllerManager() *process.Process { return c.controllerManager }

// Stop stops kube-controller-manager, kube-apiserver, then etcd. The state in Dir stays for
// a later Start.
func (c *Cluster) Stop(ctx context.Context) error {
	var errKCM error
	if c.controllerManager != nil {
		errKCM = c.controllerManager.Stop(ctx)
	}
	errAPI := c.apiserver.Stop(ctx)
	errEtcd := c.etcd.Stop(ctx)
	return errors.Join(errKCM, errAPI, errEtcd)
}

// Restart stops every process of the cluster and starts them again on the same state,
// ports and certificates, as a crash and restart of the management plane would: clients
// see the apiserver go away and come back at the same URL with the same data.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	again, err := Start(ctx, c.cfg)
	if err != nil {
		return err
	}
	*c = *again
	return nil
}

// Start starts etcd, waits for its /health, then starts kube-apiserver and waits for its
// /readyz, then kube-controller-manager with Config.Controllers if any. Processes still running from an earlier Start on the same Dir with the same
// command line are re-adopted, not restarted. If a component does not become ready, Start
// stops what it started and returns an ErrNotReady error that quotes the end of its log.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Log.With("component", "localkube", "name", cfg.Name, "dir", cfg.Dir)

	etcdBin, err := cfg.Release.Binary(release.Etcd)
	if err != nil {
		return nil, err
	}
	apiserverBin, err := cfg.Release.Binary(release.KubeAPIServer)
	if err != nil {
		return nil, err
	}
	if err := makeDirs(cfg.Dir); err != nil {
		return nil, err
	}
	p, err := resolvePorts(cfg)
	if err != nil {
		return nil, err
	}
	keys, err := ensurePKI(filepath.Join(cfg.Dir, "pki"), cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("localkube pki: %w", err)
	}
	c, err := newCluster(cfg, p, keys)
	if err != nil {
		return nil, err
	}
	probeClient, err := adminHTTPClient(keys)
	if err != nil {
		return nil, err
	}

	etcdSpec := process.Spec{
		Name:    cfg.Name + "-etcd",
		Path:    etcdBin,
		Args:    etcdArgs(cfg, p),
		Dir:     cfg.Dir,
		LogFile: filepath.Join(cfg.Dir, "logs", "etcd.log"),
		Probe:   process.HTTPProbe(nil, c.EtcdURL+"/health", nil),
	}
	apiserverSpec := process.Spec{
		Name: cfg.Name + "-kube-apiserver",
		Path: apiserverBin,
		Args: apiserverArgs(cfg, p, keys, c.EtcdURL),
		// The management kube-apiserver of a 500-machine fleet spent a quarter of its CPU in
		// GC at the default GOGC=100; 200 took 16 % off its CPU for ~1 GiB more RSS at that
		// scale (BENCHMARKS.md, "management kube-apiserver").
		Env:     []string{"GOGC=200"},
		Dir:     cfg.Dir,
		LogFile: filepath.Join(cfg.Dir, "logs", "kube-apiserver.log"),
		Probe:   process.HTTPProbe(probeClient, c.URL+"/readyz", nil),
	}
	if err := c.start(ctx, log, etcdSpec, apiserverSpec); err != nil {
		return nil, err
	}
	log.Info("local kube-apiserver ready", "url", c.URL, "kubeconfig", c.KubeconfigPath,
		"release", cfg.Release.Version, "controllers", cfg.Controllers)
	return c, nil
}

// makeDirs creates the cluster's directory, its logs directory and etcd's private data
// directory.
func makeDirs(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(dir, "etcd"), 0o700)
}

// newCluster is the Cluster of cfg at ports p before anything runs: its URLs, CA, the admin
// kubeconfig (also written to KubeconfigPath) and a REST config from it.
func newCluster(cfg Config, p ports, keys pki) (*Cluster, error) {
	adminKeyPEM, err := keys.admin.KeyPEM()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		URL:            "https://" + hostPort(cfg.Host, p.APIServer),
		EtcdURL:        "http://" + hostPort(etcdHost, p.EtcdClient),
		CAPEM:          keys.ca.CertPEM(),
		KubeconfigPath: filepath.Join(cfg.Dir, "admin.kubeconfig"),
		Release:        cfg.Release,
		Dir:            cfg.Dir,
		cfg:            cfg,
	}
	if c.Kubeconfig, err = kube.Kubeconfig(kube.KubeconfigSpec{
		Server: c.URL, CAPEM: c.CAPEM,
		ClientCertPEM: keys.admin.CertPEM(), ClientKeyPEM: adminKeyPEM,
		ClusterName: cfg.Name, UserName: adminUser,
	}); err != nil {
		return nil, err
	}
	if c.RESTConfig, err = kube.RESTConfig(c.Kubeconfig); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// start starts etcd, then kube-apiserver, then kube-controller-manager when the config
// names controllers, each ready before the next; on a failure it stops what it started.
func (c *Cluster) start(ctx context.Context, log *slog.Logger, etcdSpec, apiserverSpec process.Spec) error {
	cfg := c.cfg
	var err error
	if c.etcd, err = startReady(ctx, cfg, log, etcdSpec); err != nil {
		return err
	}
	if c.apiserver, err = startReady(ctx, cfg, log, apiserverSpec); err != nil {
		stopAfterFailure(ctx, log, c.etcd)
		return err
	}
	if len(cfg.Controllers) == 0 {
		return nil
	}
	kcmBin, err := cfg.Release.Binary(release.KubeControllerManager)
	if err == nil {
		// No probe: it serves nothing (--secure-port=0), and nothing waits for it.
		c.controllerManager, err = startReady(ctx, cfg, log, process.Spec{
			Name:    cfg.Name + "-kube-controller-manager",
			Path:    kcmBin,
			Args:    controllerManagerArgs(cfg, c.KubeconfigPath),
			Dir:     cfg.Dir,
			LogFile: filepath.Join(cfg.Dir, "logs", "kube-controller-manager.log"),
		})
	}
	if err != nil {
		stopAfterFailure(ctx, log, c.apiserver)
		stopAfterFailure(ctx, log, c.etcd)
		return err
	}
	return nil
}

// controllerManagerArgs runs just cfg.Controllers, as the admin, with one replica (no
// leader election) and no HTTPS port of its own, then cfg.ExtraControllerManagerArgs.
func controllerManagerArgs(cfg Config, kubeconfig string) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(cfg.Controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
	}
	return append(args, cfg.ExtraControllerManagerArgs...)
}

// startReady starts (or re-adopts) spec and waits for its probe.
func startReady(ctx context.Context, cfg Config, log *slog.Logger, spec process.Spec) (*process.Process, error) {
	begin := time.Now()
	proc, err := cfg.Supervisor.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := waitReady(waitCtx, proc); err != nil {
		st := proc.Status()
		stopAfterFailure(ctx, log, proc)
		return nil, fmt.Errorf("%s %w after %s (state %s, restarts %d, last error %q): %w\n--- end of %s ---\n%s",
			spec.Name, ErrNotReady, time.Since(begin).Round(time.Millisecond), st.State, st.Restarts,
			st.LastError, err, spec.LogFile, tail(spec.LogFile, 30))
	}
	st := proc.Status()
	log.Info("ready", "process", spec.Name, "pid", st.Pid, "adopted", st.Adopted,
		"took", time.Since(begin).Round(time.Millisecond))
	return proc, nil
}

// crashLoopRestarts is how many restarts before readiness make waitReady give up early: a
// component that keeps exiting has a bad configuration, and waiting out ReadyTimeout only
// delays the message from its log.
const crashLoopRestarts = 3

// waitReady waits for proc's probe, and gives up early when proc is crash-looping.
func waitReady(ctx context.Context, proc *process.Process) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, false, func(context.Context) (bool, error) {
			if st := proc.Status(); st.Restarts >= crashLoopRestarts {
				cancel(fmt.Errorf("crash-looping: exited %d times", st.Restarts))
				return true, nil
			}
			return false, nil
		})
	}()
	err := proc.WaitReady(ctx)
	cancel(nil)
	<-watched
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

func stopAfterFailure(ctx context.Context, log *slog.Logger, proc *process.Process) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := proc.Stop(stopCtx); err != nil {
		log.Warn("stop after a failed start", "process", proc.Status().Name, "err", err)
	}
}

func etcdArgs(cfg Config, p ports) []string {
	client := "http://" + hostPort(etcdHost, p.EtcdClient)
	peer := "http://" + hostPort(etcdHost, p.EtcdPeer)
	return []string{
		"--name=" + cfg.Name,
		"--data-dir=" + filepath.Join(cfg.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + cfg.Name + "=" + peer,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + cfg.Name,
	}
}

func apiserverArgs(cfg Config, p ports, keys pki, etcdURL string) []string {
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + cfg.Host,
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--advertise-address=" + cfg.Host,
		"--tls-cert-file=" + keys.path("apiserver.crt"),
		"--tls-private-key-file=" + keys.path("apiserver.key"),
		"--client-ca-file=" + keys.path("ca.crt"),
		"--service-account-key-file=" + keys.path("sa.pub"),
		"--service-account-signing-key-file=" + keys.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-bootstrap-token-auth=true",
		"--allow-privileged=true",
		// A Stop or Restart takes a second, not a kill after the stop timeout, while
		// clients hold watches open.
		kube.WatchTerminationGraceArg,
		// Without this kube-apiserver defaults to /var/run/kubernetes, which it may not own.
		"--cert-dir=" + keys.dir,
	}
	if ip := net.ParseIP(cfg.Host); ip != nil && ip.IsLoopback() {
		// A loopback advertise address keeps the "kubernetes" Endpoints from being written
		// and the reconciler from settling (ARCHITECTURE §11).
		args = append(args, "--endpoint-reconciler-type=none")
	}
	return append(args, cfg.ExtraAPIServerArgs...)
}

// adminHTTPClient is the readiness probe's client: it trusts the cluster CA and presents the
// admin certificate, so /readyz answers even when anonymous auth is turned off.
func adminHTTPClient(keys pki) (*http.Client, error) {
	keyPEM, err := keys.admin.KeyPEM()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(keys.admin.CertPEM(), keyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(keys.ca.Cert)
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}, nil
}

// tail returns the last n lines of the file at path (at most 64 KiB), for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	for i, count := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if count++; count == n {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}
