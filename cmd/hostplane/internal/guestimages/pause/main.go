// Command pause is the sandbox ("pause") image of real guest nodes (hostplane dev pushes it to
// its registry as hostplane/pause): it holds a pod's namespaces until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
