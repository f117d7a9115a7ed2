package process_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hostplane/hostplane/pkg/process"
)

func Example() {
	dir, err := os.MkdirTemp("", "hostplane-process-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	sup, err := process.NewSupervisor(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sup.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := sup.Start(ctx, process.Spec{
		Name: "sleeper",
		Path: "sleep", // looked up in PATH
		Args: []string{"300"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.WaitReady(ctx); err != nil { // no Probe: running counts as ready
		fmt.Println(err)
		return
	}
	fmt.Println(p.Status().State)

	if err := sup.StopAll(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Status().State)
	// Output:
	// Ready
	// Stopped
}

// A daemon starts etcd and waits for its health endpoint. When the daemon restarts, the same
// Start finds etcd still running from the pidfile and adopts it instead of restarting it.
func ExampleSupervisor_Start() {
	ctx := context.Background()
	dataDir := "/var/lib/hostplane"
	sup, err := process.NewSupervisor(filepath.Join(dataDir, "run"), slog.Default())
	if err != nil {
		panic(err)
	}
	// Close, not StopAll: the control plane keeps running while the daemon restarts.
	defer sup.Close()

	etcd, err := sup.Start(ctx, process.Spec{
		Name: "etcd",
		Path: filepath.Join(dataDir, "bin", "etcd"),
		Args: []string{
			"--data-dir", filepath.Join(dataDir, "etcd"),
			"--listen-client-urls", "http://127.0.0.1:2379",
			"--advertise-client-urls", "http://127.0.0.1:2379",
		},
		Probe: process.HTTPProbe(nil, "http://127.0.0.1:2379/health", nil),
	})
	if err != nil {
		panic(err)
	}
	if err := etcd.WaitReady(ctx); err != nil {
		panic(err)
	}
}
