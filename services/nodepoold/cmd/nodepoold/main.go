// Command nodepoold runs hostplane's nodepoold daemon. Keep it this small: the daemon lives in the
// nodepoold package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/nodepoold"
)

func main() { os.Exit(daemon.Main(nodepoold.Name, nodepoold.RegisterFlags, nodepoold.New)) }
