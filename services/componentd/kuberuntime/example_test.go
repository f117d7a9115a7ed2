package kuberuntime_test

import (
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// The names a cluster's serving certificates must cover under the kubernetes runtime.
func Example() {
	fmt.Println(kuberuntime.Namespace("demo"))
	fmt.Println(kuberuntime.APIServerHost("demo"))
	for _, h := range kuberuntime.EtcdMemberHosts("demo", api.HighlyAvailable) {
		fmt.Println(h)
	}
	// Output:
	// hostplane-demo
	// kube-apiserver.hostplane-demo.svc
	// etcd-0.etcd-discovery.hostplane-demo.svc
	// etcd-1.etcd-discovery.hostplane-demo.svc
	// etcd-2.etcd-discovery.hostplane-demo.svc
}
