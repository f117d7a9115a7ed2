package ignition_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_1"
	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// debianAccept is the Accept header of a machine whose Ignition reads spec 3.3.0 at most.
const debianAccept = "application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1"

func realNodePayload() ignition.Payload {
	return ignition.Payload{
		BootstrapKubeconfig: []byte("kubeconfig"), CACertPEM: []byte("ca"),
		Kubelet: ignition.KubeletConfig{
			NodeLabels: map[string]string{api.LabelNodePool: "metal", "tier": "gold"},
			Taints:     []api.Taint{{Key: "dedicated", Value: "metal", Effect: "NoSchedule"}},
			ConfigHash: "abc", KubeletVersion: "v1.34.4",
		},
		Node: &ignition.Node{
			Kubelet:   ignition.Binary{URL: "https://10.0.0.1:9443/releases/v1.34.4/kubelet", SHA512: strings.Repeat("ab", 64)},
			KubeProxy: ignition.Binary{URL: "https://10.0.0.1:9443/releases/v1.34.4/kube-proxy", SHA512: strings.Repeat("cd", 64)},
			Token:     "tok", ServerCAPEM: []byte("ca"), PodCIDR: "10.244.0.0/24", SandboxImage: "10.0.0.1:5000/hostplane/pause:3.10",
			Registry: &ignition.Registry{Host: "10.0.0.1:5000", CAPEM: []byte("registry-ca"), Username: "hostplane", Password: "s3cret"},
		},
	}
}

func TestPayload_RealNodeGetsTheKubeletItsUnitAndConfigs(t *testing.T) {
	b, err := realNodePayload().Render()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ignition.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]ignition.Binary{ignition.PathKubelet: realNodePayload().Node.Kubelet, ignition.PathKubeProxy: realNodePayload().Node.KubeProxy} {
		i := slices.IndexFunc(cfg.Storage.Files, func(f types.File) bool { return f.Path == path })
		if i < 0 {
			t.Fatalf("no %s in the payload", path)
		}
		f := cfg.Storage.Files[i]
		if *f.Mode != 0o755 || len(f.Contents.HTTPHeaders) != 1 || *f.Contents.HTTPHeaders[0].Value != "Bearer tok" ||
			f.Contents.Source == nil || *f.Contents.Source != want.URL || f.Contents.Verification.Hash == nil || *f.Contents.Verification.Hash != "sha512-"+want.SHA512 {
			t.Errorf("%s is not fetched from its URL with its hash and the token: %+v", path, f)
		}
	}
	units := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		units[u.Name] = u.Enabled != nil && *u.Enabled
		if u.Name == ignition.UnitKubelet {
			for _, want := range []string{"--node-labels=hostplane.dev/config=abc,hostplane.dev/nodepool=metal,tier=gold", "--bootstrap-kubeconfig=" + ignition.PathBootstrapKubeconfig,
				"--cgroup-root=" + ignition.CgroupRootPrefix + "/%H", "Requires=containerd.service"} {
				if !strings.Contains(*u.Contents, want) {
					t.Errorf("kubelet unit lacks %q:\n%s", want, *u.Contents)
				}
			}
		}
	}
	if !units[ignition.UnitKubelet] || !units[ignition.UnitContainerd] || !units[ignition.UnitKubeProxy] {
		t.Errorf("units enabled = %v, want kubelet, kube-proxy and containerd", units)
	}
	raw, err := ignition.FileContents(cfg, ignition.PathKubeProxyConfiguration)
	if err != nil {
		t.Fatal(err)
	}
	var kp kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(raw, &kp); err != nil {
		t.Fatalf("the KubeProxyConfiguration does not parse: %v\n%s", err, raw)
	}
	if kp.Kind != "KubeProxyConfiguration" || kp.Mode != "iptables" || kp.ClusterCIDR != "10.244.0.0/24" ||
		kp.ClientConnection.Kubeconfig != ignition.PathKubeletKubeconfig {
		t.Errorf("KubeProxyConfiguration = %+v", kp)
	}
	raw, err = ignition.FileContents(cfg, ignition.PathKubeletConfiguration)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(raw, &kc); err != nil {
		t.Fatalf("the KubeletConfiguration does not parse: %v\n%s", err, raw)
	}
	if kc.Kind != "KubeletConfiguration" || kc.Authentication.X509.ClientCAFile != ignition.PathCACert || !kc.RotateCertificates ||
		len(kc.RegisterWithTaints) != 1 || kc.RegisterWithTaints[0].Key != "dedicated" || kc.CgroupDriver != "cgroupfs" {
		t.Errorf("KubeletConfiguration = %+v", kc)
	}
	containerd, _ := ignition.FileContents(cfg, ignition.PathContainerdConfig)
	if !strings.Contains(string(containerd), `sandbox_image = "10.0.0.1:5000/hostplane/pause:3.10"`) {
		t.Errorf("containerd config:\n%s", containerd)
	}
	// The pod network's configuration is the node's pod range's, which netd writes once
	// the node has one: a payload-wide one would give every node the same addresses.
	if cni, err := ignition.FileContents(cfg, ignition.PathCNIConfig); err == nil {
		t.Errorf("the payload writes a CNI configuration:\n%s", cni)
	}
	// The registry's credential and CA reach containerd.
	for _, want := range []string{`registry.configs."10.0.0.1:5000".auth]`, `password = "s3cret"`, `ca_file = "/etc/containerd/certs/10.0.0.1_5000/ca.crt"`} {
		if !strings.Contains(string(containerd), want) {
			t.Errorf("containerd config lacks %s:\n%s", want, containerd)
		}
	}
	if ca, err := ignition.FileContents(cfg, "/etc/containerd/certs/10.0.0.1_5000/ca.crt"); err != nil || string(ca) != "registry-ca" {
		t.Errorf("registry CA file: %q %v", ca, err)
	}
	// The simulated machine's file is still there.
	if _, err := ignition.FileContents(cfg, ignition.PathKubeletConfig); err != nil {
		t.Error(err)
	}
}

func TestPayload_RealNodeWithoutItsKubeletIsNotServed(t *testing.T) {
	p := realNodePayload()
	p.Node.KubeProxy.SHA512 = ""
	if _, err := p.Render(); !errors.Is(err, ignition.ErrInvalidPayload) || !strings.Contains(err.Error(), "kube-proxy SHA-512") {
		t.Fatalf("Render = %v, want ErrInvalidPayload naming the kube-proxy SHA-512", err)
	}
	p = realNodePayload()
	p.Node.Kubelet.URL = "http://10.0.0.1/kubelet"
	if _, err := p.Render(); !errors.Is(err, ignition.ErrInvalidPayload) {
		t.Fatalf("a kubelet over plain http rendered: %v", err)
	}
}

func TestValidateDocuments_RefusesTheRealNodesFiles(t *testing.T) {
	doc := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"` + ignition.PathKubelet + `","contents":{"source":"data:,x"}}]}}`
	errs := ignition.ValidateDocuments([]api.ConfigDocument{{Name: "mine", Content: doc}})
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, "written by hostplane") {
		t.Fatalf("errors = %+v, want the kubelet's path refused", errs)
	}
}

func TestNegotiate_ServesTheVersionTheMachineReads(t *testing.T) {
	b, err := realNodePayload().Render()
	if err != nil {
		t.Fatal(err)
	}
	for accept, want := range map[string]string{
		"":           ignition.Version,
		"*/*":        ignition.Version,
		debianAccept: "3.3.0",
		"application/vnd.coreos.ignition+json;version=3.5.0, application/vnd.coreos.ignition+json;version=3.4.0;q=0.5": "3.5.0",
		"application/vnd.coreos.ignition+json; version=3.4.0":                                                          "3.4.0",
	} {
		out, v, err := ignition.Negotiate(b, accept)
		if err != nil || v != want {
			t.Errorf("Accept %q: version %q (%v), want %q", accept, v, err, want)
			continue
		}
		if !strings.Contains(string(out), `"version":"`+want+`"`) {
			t.Errorf("Accept %q: the config says another version: %.120s", accept, out)
		}
		back, err := ignition.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if src, _ := ignition.FileContents(back, ignition.PathKubeletConfiguration); len(src) == 0 {
			t.Errorf("Accept %q: the KubeletConfiguration is lost", accept)
		}
	}
	// What Debian's Ignition 2.14 gets, it parses as its own newest spec.
	out, _, _ := ignition.Negotiate(b, debianAccept)
	if _, _, err := v3_3.Parse(out); err != nil {
		t.Errorf("the 3.3.0 config does not parse as 3.3.0: %v", err)
	}
}

func TestNegotiate_RefusesAConfigTheMachineCannotRead(t *testing.T) {
	p := realNodePayload()
	// LUKS discard is spec 3.4.0.
	p.Documents = []api.ConfigDocument{{Name: "luks", Content: `{"ignition":{"version":"3.4.0"},"storage":{"luks":[{"name":"data","device":"/dev/sdb","discard":true,"keyFile":{"source":"data:,k"}}]}}`}}
	b, err := p.Render()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ignition.Negotiate(b, debianAccept); !errors.Is(err, ignition.ErrNotAcceptable) {
		t.Fatalf("a 3.4-only field was served to a 3.3 machine: %v", err)
	}
	if _, v, err := ignition.Negotiate(b, "application/vnd.coreos.ignition+json;version=3.4.0"); err != nil || v != "3.4.0" {
		t.Fatalf("a 3.4 machine: %q %v", v, err)
	}
}

func TestStub_IsReadByEveryIgnitionV2(t *testing.T) {
	b, err := ignition.Stub(ignition.StubInfo{URL: "https://h/ignition", Token: "t", CAPEM: []byte("ca")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version":"`+ignition.StubVersion+`"`) {
		t.Fatalf("stub = %s, want spec %s", b, ignition.StubVersion)
	}
	if _, _, err := v3_1.Parse(b); err != nil {
		t.Fatalf("the stub does not parse as spec 3.1.0: %v", err)
	}
}
