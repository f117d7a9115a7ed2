package guest

import (
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
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

func TestServerOf_SendsTheDaemonsAroundTheEndpoint(t *testing.T) {
	ep := api.Endpoint{Host: "127.0.0.1", Port: 6000}
	one := []api.Endpoint{{Host: "127.0.0.1", Port: 6001}}
	two := []api.Endpoint{{Host: "127.0.0.1", Port: 6001}, {Host: "127.0.0.1", Port: 6002}}
	internal := &api.Endpoint{Host: "127.0.0.1", Port: 6003}
	tests := []struct {
		name string
		inf  api.Infra
		want string
	}{
		{"single apiserver behind the balancer: its own port", api.Infra{Endpoint: ep, APIServers: one}, "https://127.0.0.1:6001"},
		{"single apiserver that is the endpoint: the kubeconfig's", api.Infra{Endpoint: one[0], APIServers: one}, ""},
		{"several apiservers: the internal listener", api.Infra{Endpoint: ep, APIServers: two, InternalEndpoint: internal}, "https://127.0.0.1:6003"},
		{"several apiservers, no internal listener yet: the kubeconfig's", api.Infra{Endpoint: ep, APIServers: two}, ""},
		{"nothing allocated", api.Infra{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serverOf(&tt.inf); got != tt.want {
				t.Errorf("server %q, want %q", got, tt.want)
			}
		})
	}
}
