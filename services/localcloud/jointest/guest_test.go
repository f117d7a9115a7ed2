package jointest_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/pkid"
)

// guestUp bounds a guest control plane's start: generous, the machine is shared.
const guestUp = 5 * time.Minute

// guestCluster is a real guest control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) run by the real infrad, pkid and componentd over an embedded NATS.
type guestCluster struct {
	Name    string
	Release release.Release
	Admin   *kubernetes.Clientset
	REST    *rest.Config // admin
	Log     string       // the daemons' log file
}

type daemonRunner interface {
	Run(ctx context.Context) error
	Ready(ctx context.Context) error
}

// startGuest starts a SingleReplica guest cluster of the latest release and returns its admin
// client once the apiserver answers. It skips without the release binaries (make k8s-bins).
func startGuest(t *testing.T, name string) *guestCluster {
	t.Helper()
	rel := release.Latest()
	testenv.RequireBinaries(t, rel, release.Components()...)
	env := testenv.NATS(t)
	ctx := t.Context()
	dataDir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "daemons.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	base := func() daemon.Base {
		return daemon.Base{NATSURL: env.Server.URL(), DataDir: dataDir, AdminAddr: "127.0.0.1:0",
			Logger: logger, Registry: observe.NewRegistry()}
	}
	// Registered before any daemon starts, so it runs after they stopped.
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("--- last daemon log lines ---\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
		d, err := componentd.New(componentd.Config{Base: daemon.Base{DataDir: dataDir, Logger: logger}})
		if err == nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := d.StopAll(sctx); err != nil {
				t.Errorf("componentd StopAll: %v", err)
			}
		}
		_ = f.Close()
	})
	run := func(name string, d daemonRunner, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		testenv.Run(t, name, d.Run)
		testenv.Eventually(t, time.Minute, func() bool { return d.Ready(ctx) == nil }, "%s ready", name)
	}
	inf, err := infrad.New(infrad.Config{Base: base()})
	run("infrad", inf, err)
	pk, err := pkid.New(pkid.Config{Base: base()})
	run("pkid", pk, err)
	cd, err := componentd.New(componentd.Config{Base: base()})
	run("componentd", cd, err)

	kv := func(bucket string) *store.Store[api.Cluster] {
		b, err := bus.EnsureBucket(ctx, env.JS, bucket)
		if err != nil {
			t.Fatal(err)
		}
		return store.New[api.Cluster](b)
	}
	clusters := kv(bus.BucketClusters)
	c := &api.Cluster{
		ObjectMeta: api.ObjectMeta{Name: name},
		Spec: api.ClusterSpec{Release: api.Release{Version: rel.Version}, Platform: api.Platform{Type: api.PlatformLocal},
			ControllerAvailabilityPolicy: api.SingleReplica},
	}
	if _, err := clusters.Create(ctx, name, c); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(env.JS, "clusterd").Publish(ctx, name, events.ResourceCluster, "created", name, nil); err != nil {
		t.Fatal(err)
	}

	pb, err := bus.EnsureBucket(ctx, env.JS, bus.BucketPKI)
	if err != nil {
		t.Fatal(err)
	}
	pkiStore := store.New[api.ClusterPKI](pb)
	var kc []byte
	testenv.Eventually(t, guestUp, func() bool {
		p, _, err := pkiStore.Get(ctx, name)
		if err != nil || p.Kubeconfigs[api.KubeconfigAdmin] == nil {
			return false
		}
		seal, err := certs.LoadOrCreateSealKey(filepath.Join(dataDir, "pki.key"))
		if err != nil {
			t.Fatal(err)
		}
		kc, err = seal.Open(p.Kubeconfigs[api.KubeconfigAdmin])
		return err == nil
	}, "cluster %s has an admin kubeconfig", name)
	g := &guestCluster{Name: name, Release: rel, Log: logPath}
	if g.REST, err = kube.RESTConfig(kc); err != nil {
		t.Fatal(err)
	}
	if g.Admin, err = kube.Clientset(kc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, guestUp, func() bool {
		_, err := g.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil // the apiserver answers and kube-controller-manager runs
	}, "cluster %s serves and its controllers run", name)
	return g
}
