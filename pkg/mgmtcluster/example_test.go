package mgmtcluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hostplane/hostplane/pkg/mgmtcluster"
)

// A test brings up two kubelet nodes with an image of its own, waits for them, and tears
// everything down (as root; make mgmt-test installs and builds what it needs).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img := mgmtcluster.Image{
		Ref:        "hostplane.local/podserver:1",
		Files:      []mgmtcluster.ImageFile{{Path: "/podserver", Source: "/tmp/podserver"}},
		Entrypoint: []string{"/podserver"},
	}
	if err := img.WriteArchive("/tmp/podserver.tar"); err != nil {
		fmt.Println(err)
		return
	}
	c, err := mgmtcluster.Start(ctx, mgmtcluster.Config{Nodes: 2}, "/tmp/podserver.tar")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop(context.WithoutCancel(ctx))
	if err := c.WaitNodesReady(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("kubeconfig:", c.KubeconfigPath)
}
