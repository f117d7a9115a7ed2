package kube_test

import (
	"fmt"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/kube"
)

func ExampleKubeconfig() {
	ca, err := certs.NewCA("cluster-ca", time.Hour)
	if err != nil {
		panic(err)
	}
	kubeconfig, err := kube.Kubeconfig(kube.KubeconfigSpec{
		Server:      "https://127.0.0.1:6443",
		CAPEM:       ca.CertPEM(),
		Token:       "abcdef.0123456789abcdef",
		ClusterName: "demo",
	})
	if err != nil {
		panic(err)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Host, cfg.BearerToken != "")
	// Output: https://127.0.0.1:6443 true
}
