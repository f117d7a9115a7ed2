// Package stack is what the integration tests share: an embedded NATS, a data dir, one log
// file for every daemon of a test (its end printed when the test fails), and the real
// daemons started beside the daemon under test, each stopped when the test ends.
package stack

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/pkid"
)

// ReadyTimeout bounds a daemon's start.
const ReadyTimeout = time.Minute

// Options shape an Env; the zero value is fine.
type Options struct {
	// DataDir is the daemons' data dir; default a new t.TempDir().
	DataDir string
	// Level is the daemons' log level; default Info.
	Level slog.Level
	// TailLines of the log are printed when the test fails; default 80.
	TailLines int
	// KeepLogEnv names an environment variable that, when set, is a file the whole log is
	// copied to at the end (for debugging a test that passes).
	KeepLogEnv string
}

// Env is one test's NATS, data dir and log.
type Env struct {
	T       testing.TB
	Ctx     context.Context
	NATS    *testenv.NATSEnv
	DataDir string
	Logger  *slog.Logger

	clusterd *bus.Publisher // the stand-in for clusterd's events
}

// New starts an embedded NATS for t and opens the log. Every control-plane process a
// componentd of the test starts is stopped when the test ends, even one that failed
// half-way: the stop is registered here, before any daemon starts, so it runs after they
// stopped.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{T: t, Ctx: t.Context(), NATS: testenv.NATS(t), DataDir: o.DataDir}
	e.clusterd = bus.NewPublisher(e.NATS.JS, "clusterd")
	if e.DataDir == "" {
		e.DataDir = t.TempDir()
	}
	if o.TailLines == 0 {
		o.TailLines = 80
	}
	e.Logger = slog.New(slog.NewTextHandler(e.logFile(o), &slog.HandlerOptions{Level: o.Level}))
	t.Cleanup(e.stopProcesses)
	return e
}

// logFile collects every daemon's log in a file outside the data dir.
func (e *Env) logFile(o Options) io.Writer {
	path := filepath.Join(e.T.TempDir(), "daemons.log")
	f, err := os.Create(path)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		if keep := os.Getenv(o.KeepLogEnv); o.KeepLogEnv != "" && keep != "" {
			b, _ := os.ReadFile(path)
			_ = os.WriteFile(keep, b, 0o600)
		}
		if e.T.Failed() {
			b, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			e.T.Logf("--- last daemon log lines ---\n%s", strings.Join(lines[max(0, len(lines)-o.TailLines):], "\n"))
		}
		_ = f.Close()
	})
	return f
}

// stopProcesses stops every process a componentd left under the data dir, as hostplane
// dev's shutdown does, and fails the test if any process still names the data dir.
func (e *Env) stopProcesses() {
	d, err := componentd.New(componentd.Config{Base: daemon.Base{DataDir: e.DataDir, Logger: e.Logger}})
	if err != nil {
		e.T.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.StopAll(ctx); err != nil {
		e.T.Errorf("componentd StopAll: %v", err)
	}
	if left := testenv.ProcessesUnder(e.DataDir); len(left) > 0 {
		e.T.Errorf("processes left running under %s: %v", e.DataDir, left)
	}
}

// Base is daemon name's base config on the test's NATS (as the daemon's identity), data dir
// and log, with reg.
func (e *Env) Base(name string, reg *prometheus.Registry) daemon.Base {
	return daemon.Base{NATSURL: e.NATS.Server.URL(), NATSNKeyFile: e.NATS.SeedFile(name), DataDir: e.DataDir, AdminAddr: "127.0.0.1:0", Logger: e.Logger, Registry: reg}
}

// Runner is a daemon: New(...).Run, and its readiness.
type Runner interface {
	Run(ctx context.Context) error
	Ready(ctx context.Context) error
	AdminAddr(ctx context.Context) string
}

// Run starts d until the test ends (or stop), waits until it is ready and returns its admin
// address.
func (e *Env) Run(name string, d Runner) (stop func(), addr string) {
	e.T.Helper()
	_, stop = testenv.Run(e.T, name+" Run", d.Run)
	actx, cancel := context.WithTimeout(e.Ctx, ReadyTimeout)
	defer cancel()
	addr = d.AdminAddr(actx)
	testenv.Eventually(e.T, ReadyTimeout, func() bool { return d.Ready(e.Ctx) == nil }, "%s ready", name)
	return stop, addr
}

// StartInfrad starts the real infrad.
func (e *Env) StartInfrad() {
	e.T.Helper()
	d, err := infrad.New(infrad.Config{Base: e.Base(infrad.Name, observe.NewRegistry())})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Run("infrad", d)
}

// StartComponentd starts the real componentd.
func (e *Env) StartComponentd() {
	e.T.Helper()
	d, err := componentd.New(componentd.Config{Base: e.Base(componentd.Name, observe.NewRegistry())})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Run("componentd", d)
}

// StartPKID starts the real pkid and returns its admin base URL.
func (e *Env) StartPKID() string {
	e.T.Helper()
	d, err := pkid.New(pkid.Config{Base: e.Base(pkid.Name, observe.NewRegistry())})
	if err != nil {
		e.T.Fatal(err)
	}
	_, addr := e.Run("pkid", d)
	return "http://" + addr
}

// Bucket opens (creating it if needed) a KV bucket as a typed store.
func Bucket[T any](e *Env, name string) *store.Store[T] {
	e.T.Helper()
	kv, err := bus.EnsureBucket(e.Ctx, e.NATS.JS, name)
	if err != nil {
		e.T.Fatal(err)
	}
	return store.New[T](kv)
}

// AdminKubeconfig is a guest cluster's admin kubeconfig from its PKI record, as clusterd
// hands it out; nil until pkid issued it.
func (e *Env) AdminKubeconfig(cluster string) []byte {
	e.T.Helper()
	p, _, err := Bucket[api.ClusterPKI](e, bus.BucketPKI).Get(e.Ctx, cluster)
	if err != nil || p.Kubeconfigs[api.KubeconfigAdmin] == nil {
		return nil
	}
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(e.DataDir, pkid.SealKeyFileName))
	if err != nil {
		e.T.Fatal(err)
	}
	kc, err := seal.Open(p.Kubeconfigs[api.KubeconfigAdmin])
	if err != nil {
		e.T.Fatal(err)
	}
	return kc
}

// AdminClientset is a client of AdminKubeconfig; the test fails when there is none yet.
func (e *Env) AdminClientset(cluster string) *kubernetes.Clientset {
	e.T.Helper()
	kc := e.AdminKubeconfig(cluster)
	if kc == nil {
		e.T.Fatalf("cluster %s has no admin kubeconfig yet", cluster)
	}
	cs, err := kube.Clientset(kc)
	if err != nil {
		e.T.Fatal(err)
	}
	return cs
}

// The daemons under test follow clusters: these stand in for clusterd, writing Cluster
// records and publishing cluster events as it does.

// Cluster is a cluster on the local platform at version with the availability policy.
func Cluster(name, version, policy string) *api.Cluster {
	return &api.Cluster{
		ObjectMeta: api.ObjectMeta{Name: name},
		Spec: api.ClusterSpec{Release: api.Release{Version: version}, Platform: api.Platform{Type: api.PlatformLocal},
			ControllerAvailabilityPolicy: policy},
	}
}

// CreateCluster writes c and publishes cluster.created.
func (e *Env) CreateCluster(c *api.Cluster) {
	e.T.Helper()
	if _, err := Bucket[api.Cluster](e, bus.BucketClusters).Create(e.Ctx, c.Name, c); err != nil {
		e.T.Fatal(err)
	}
	e.PublishCluster(c.Name, "created")
}

// MarkClusterDeleting sets the cluster's deletion timestamp and publishes cluster.deleting.
func (e *Env) MarkClusterDeleting(name string) {
	e.T.Helper()
	if _, _, err := Bucket[api.Cluster](e, bus.BucketClusters).Mutate(e.Ctx, name, false, func(c *api.Cluster) error {
		now := time.Now().UTC()
		c.DeletionTimestamp = &now
		return nil
	}); err != nil {
		e.T.Fatal(err)
	}
	e.PublishCluster(name, "deleting")
}

// PublishCluster publishes the cluster event verb as clusterd does.
func (e *Env) PublishCluster(name, verb string) {
	e.T.Helper()
	if _, err := e.clusterd.Publish(e.Ctx, name, events.ResourceCluster, verb, name, nil); err != nil {
		e.T.Fatal(err)
	}
}
