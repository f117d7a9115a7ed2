// Command infrad runs hostplane's infrad daemon. Keep it this small: the daemon lives in the
// infrad package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/infrad"
)

func main() { os.Exit(daemon.Main(infrad.Name, infrad.RegisterFlags, infrad.New)) }
