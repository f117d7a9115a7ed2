// Command clusterd runs hostplane's clusterd daemon. Keep it this small: the daemon lives in the
// clusterd package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/clusterd"
)

func main() { os.Exit(daemon.Main(clusterd.Name, clusterd.RegisterFlags, clusterd.New)) }
