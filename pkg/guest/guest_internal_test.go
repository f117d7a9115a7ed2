package guest

import (
	"testing"

	"github.com/hostplane/hostplane/pkg/kube"
)

func TestWithServer_PointsTheKubeconfigAtTheAPIServerAndKeepsTheCredentials(t *testing.T) {
	kc, err := kube.Kubeconfig(kube.KubeconfigSpec{Server: "https://127.0.0.1:6443", CAPEM: []byte("ca"), Token: "secret-token"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := withServer(kc, "https://127.0.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.RESTConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:7000" || cfg.BearerToken != "secret-token" || string(cfg.CAData) != "ca" {
		t.Errorf("rewritten kubeconfig: host %q token %q ca %q", cfg.Host, cfg.BearerToken, cfg.CAData)
	}
}
