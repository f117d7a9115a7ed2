// Command componentd runs hostplane's componentd daemon. Keep it this small: the daemon lives in the
// componentd package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/componentd"
)

func main() { os.Exit(daemon.Main(componentd.Name, componentd.RegisterFlags, componentd.New)) }
