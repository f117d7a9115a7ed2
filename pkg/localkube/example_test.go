package localkube_test

import (
	"context"
	"log/slog"

	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/process"
)

// A daemon starts its management apiserver; after its own restart, the same call re-adopts
// the running processes.
func ExampleStart() {
	ctx := context.Background()
	sup, err := process.NewSupervisor(".hostplane/run", slog.Default())
	if err != nil {
		panic(err)
	}
	defer sup.Close() // leaves the processes running for the next start

	cluster, err := localkube.Start(ctx, localkube.Config{Dir: ".hostplane/mgmt", Supervisor: sup})
	if err != nil {
		panic(err)
	}
	cs, err := cluster.Clientset()
	if err != nil {
		panic(err)
	}
	_ = cs // list, watch, apply ...
}
