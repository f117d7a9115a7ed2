// Command ignitiond runs hostplane's ignitiond daemon. Keep it this small: the daemon lives in the
// ignitiond package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/ignitiond"
)

func main() { os.Exit(daemon.Main(ignitiond.Name, ignitiond.RegisterFlags, ignitiond.New)) }
