// Command clusterctl is Cluster API's own CLI, built from the module proxy at the Cluster API
// version nodepoold runs (go.mod), so the e2e tests can run `clusterctl describe cluster`
// against hostplane's management kube-apiserver. Not part of go.work.
package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/cmd"
)

func main() { cmd.Execute() }
