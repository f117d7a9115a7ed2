package nodepoold

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostplane/hostplane/pkg/crd"
	"github.com/hostplane/hostplane/pkg/crd/capi"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// A management apiserver that restarts while nodepoold's manager is starting leaves that
// manager stopped with caches that never sync. A reconcile that was reading through it must
// get an error and try again with the next manager, not wait forever (its pool would never
// be reconciled again: CI saw a pool never scale after four restarts in a row).
func TestManagement_AReadThroughAManagerStoppedBeforeItsCachesSynced_Returns(t *testing.T) {
	kube := testenv.KubeAPIServer(t)
	ctx := t.Context()
	if err := crd.Install(ctx, kube.RESTConfig, capi.CRDs, Name); err != nil {
		t.Fatalf("install Cluster API's CRDs: %v", err)
	}
	// A user with no RBAC permission: its informers' lists are forbidden, so the caches start
	// and never sync, as a manager's do when the apiserver goes away again while they list.
	cfg := rest.CopyConfig(kube.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "hostplane-test-nobody"}
	m := &management{log: slog.New(slog.DiscardHandler), rest: cfg, enqueue: func(string) {},
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{Name: "rebuilds"})}
	mgr, err := m.build(ctx)
	if err != nil {
		t.Fatalf("build the manager: %v", err)
	}
	running, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = m.run(running, mgr) }()

	key := client.ObjectKey{Namespace: "ns", Name: "workers"}
	// Wait until the cache has started: a read then waits for the sync instead of failing
	// with "the cache is not started".
	testenv.Eventually(t, time.Minute, func() bool {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := mgr.GetClient().Get(short, key, &clusterv1.MachineDeployment{})
		return err != nil && short.Err() != nil
	}, "the manager's cache never started")
	if m.ready() == nil {
		t.Fatal("ready() with caches that cannot sync")
	}

	bound, done := m.bind(ctx)
	defer done()
	read := make(chan error, 1)
	// Whether the read is already waiting or starts after the stop, a stopped cache that never
	// synced holds it: no ordering between the two is needed.
	go func() { read <- m.client().Get(bound, key, &clusterv1.MachineDeployment{}) }()
	stop() // the manager is stopped to be built again
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the read through a stopped manager with unsynced caches succeeded")
		}
		if !errors.Is(context.Cause(bound), errManagerStopped) {
			t.Errorf("the bound context ended with %v, want errManagerStopped", context.Cause(bound))
		}
		if m.ready() == nil {
			t.Error("ready() after the manager stopped")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read through a manager stopped before its caches synced still waits 30 s later: its reconcile (and its pool) would wait forever")
	}
}
