// Command etcd is the etcd server hostplane runs for every control plane, built from the
// module proxy at the version pinned in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
