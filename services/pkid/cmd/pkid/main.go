// Command pkid runs hostplane's pkid daemon. Keep it this small: the daemon lives in the
// pkid package.
package main

import (
	"os"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/services/pkid"
)

func main() { os.Exit(daemon.Main(pkid.Name, pkid.RegisterFlags, pkid.New)) }
