package ignition

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbasev1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
)

// Files and units of a real node's payload (Payload.Node): what turns a stock Ignition-based
// OS with systemd, containerd and runc (and, for the bridge network, Debian's CNI plugins in
// /usr/lib/cni) into a kubelet node of the pool. Config documents may not write them.
const (
	// PathKubelet is the kubelet of the pool's release, fetched by Ignition over HTTPS from
	// the listener the machine got its config from and checked against its SHA-512.
	PathKubelet = "/usr/local/bin/kubelet"
	// PathKubeProxy is the release's kube-proxy, fetched like the kubelet.
	PathKubeProxy = "/usr/local/bin/kube-proxy"
	// PathKubeProxyConfiguration is kube-proxy's kubeproxy.config.k8s.io/v1alpha1
	// KubeProxyConfiguration (YAML).
	PathKubeProxyConfiguration = "/etc/kubernetes/kube-proxy-config.yaml"
	// PathKubeletConfiguration is the kubelet's kubelet.config.k8s.io/v1beta1
	// KubeletConfiguration (YAML).
	PathKubeletConfiguration = "/etc/kubernetes/kubelet-config.yaml"
	// PathKubeletKubeconfig is where the kubelet writes its kubeconfig once TLS bootstrap
	// got it a client certificate (in PathKubeletPKI).
	PathKubeletKubeconfig = "/var/lib/kubelet/kubeconfig"
	PathKubeletPKI        = "/var/lib/kubelet/pki"
	// PathContainerdConfig is containerd's config: CRI with the sandbox image, runc under
	// the cgroupfs driver, CNI from PathCNIConfig's directory.
	PathContainerdConfig = "/etc/containerd/config.toml"
	// PathCNIConfig is the pod network of the node: a bridge over the node's pod range with
	// host-local addresses, written by the cluster's pod network (hostplane-netd, a
	// DaemonSet componentd applies) once the node has a range, not by the payload: until
	// then the kubelet reports the node's network not ready.
	PathCNIConfig = "/etc/cni/net.d/10-hostplane.conflist"
	// PathSysctl holds the sysctls pods need (forwarding, bridged traffic through iptables).
	PathSysctl = "/etc/sysctl.d/90-hostplane.conf"
	// PathKubeletPre runs before the kubelet: it loads PathSysctl and makes the node's
	// cgroup root.
	PathKubeletPre = "/usr/local/libexec/hostplane-kubelet-pre"
	// PathModules names the kernel modules kube-proxy and the bridge need.
	PathModules = "/etc/modules-load.d/hostplane.conf"
	// UnitKubelet runs the kubelet, UnitKubeProxy kube-proxy; UnitContainerd is the OS's own
	// containerd unit, enabled.
	UnitKubelet    = "kubelet.service"
	UnitKubeProxy  = "kube-proxy.service"
	UnitContainerd = "containerd.service"
	// CNIBinDir is where the CNI plugins are: Debian's containernetworking-plugins.
	CNIBinDir = "/usr/lib/cni"
	// ContainerdSocket is containerd's CRI endpoint.
	ContainerdSocket = "/run/containerd/containerd.sock"
	// CgroupRootPrefix: each node's pods live under the cgroup /hostplane/<hostname>, so
	// that nodes sharing one kernel's cgroup hierarchies (containers on one host) do not
	// share kubepods; on a machine of its own it is just a level more.
	CgroupRootPrefix = "/hostplane"
)

// nodePaths are the files a real node's payload writes.
var nodePaths = []string{PathKubelet, PathKubeProxy, PathKubeletPre, PathKubeletConfiguration, PathKubeProxyConfiguration,
	PathContainerdConfig, PathCNIConfig, PathSysctl, PathModules}

// Node is what a payload needs to boot a real node (nil in Payload: a simulated machine of
// the local platform, which reads only PathKubeletConfig).
type Node struct {
	// Kubelet and KubeProxy are the release's node binaries, each fetched from its https
	// URL with the header "Authorization: Bearer <Token>", trusting ServerCAPEM (the
	// machine's stub already trusts it; the payload says so again for its own fetches).
	Kubelet     Binary
	KubeProxy   Binary
	Token       string
	ServerCAPEM []byte
	// ProviderIDPrefix, for a machine Hostplane provisions (platform docker), is its Node's
	// spec.providerID up to the machine's name, which is its hostname:
	// api.ProviderID(cluster, ""). Cluster API finds a Machine's Node by it. Empty on
	// platform none: the user's machines have no Machine.
	ProviderIDPrefix string
	// PodCIDR is the cluster's pod network (kube-proxy's clusterCIDR: what is not in it is
	// outside the cluster).
	PodCIDR string
	// ClusterDomain is the cluster's DNS domain (default cluster.local); ClusterDNS the
	// Service address of its DNS server, if it has one.
	ClusterDomain string
	ClusterDNS    []string
	// SandboxImage is the pause image containerd starts every pod's sandbox from.
	SandboxImage string
	// Registry, when set, is the OCI registry the node pulls from with a credential,
	// trusting its CA.
	Registry *Registry
}

// Binary is a file Ignition fetches over https and checks against its SHA-512.
type Binary struct {
	URL    string
	SHA512 string // hex
}

// file is b as the executable at path, fetched with token.
func (b Binary) file(path, token string) types.File {
	f := file(path, 0o755, nil)
	f.Contents = types.Resource{
		Source:       new(b.URL),
		HTTPHeaders:  types.HTTPHeaders{{Name: "Authorization", Value: new("Bearer " + token)}},
		Verification: types.Verification{Hash: new("sha512-" + b.SHA512)},
	}
	return f
}

// Registry is an OCI registry a node pulls images from.
type Registry struct {
	Host               string // host:port, as image names carry it
	CAPEM              []byte
	Username, Password string
}

// registryCAPath is where a node keeps the CA of the registry at host.
func registryCAPath(host string) string {
	return "/etc/containerd/certs/" + strings.ReplaceAll(host, ":", "_") + "/ca.crt"
}

// validate says what a Node lacks.
func (n *Node) validate() error {
	var missing []string
	for name, v := range map[string]string{"kubelet URL": n.Kubelet.URL, "kubelet SHA-512": n.Kubelet.SHA512,
		"kube-proxy URL": n.KubeProxy.URL, "kube-proxy SHA-512": n.KubeProxy.SHA512,
		"token": n.Token, "pod CIDR": n.PodCIDR, "sandbox image": n.SandboxImage} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: the real node's %s missing", ErrInvalidPayload, strings.Join(missing, ", "))
	}
	for name, b := range map[string]Binary{"kubelet": n.Kubelet, "kube-proxy": n.KubeProxy} {
		if !strings.HasPrefix(b.URL, "https://") {
			return fmt.Errorf("%w: %s URL %q is not https", ErrInvalidPayload, name, b.URL)
		}
	}
	return nil
}

// config is the node's part of the payload: its files and units.
func (n *Node) config(k KubeletConfig) (types.Config, error) {
	if err := n.validate(); err != nil {
		return types.Config{}, err
	}
	kubeletConf, err := n.kubeletConfiguration(k)
	if err != nil {
		return types.Config{}, err
	}
	proxyConf, err := n.kubeProxyConfiguration()
	if err != nil {
		return types.Config{}, err
	}
	cfg := types.Config{
		Ignition: types.Ignition{Version: Version},
		Storage: types.Storage{Files: []types.File{
			n.Kubelet.file(PathKubelet, n.Token),
			n.KubeProxy.file(PathKubeProxy, n.Token),
			file(PathKubeletConfiguration, 0o644, kubeletConf),
			file(PathKubeProxyConfiguration, 0o644, proxyConf),
			file(PathContainerdConfig, 0o644, []byte(n.containerdConfig())),
			file(PathSysctl, 0o644, []byte("net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\n")),
			file(PathModules, 0o644, []byte("br_netfilter\noverlay\n")),
			file(PathKubeletPre, 0o755, []byte(kubeletPre)),
		}},
		Systemd: types.Systemd{Units: []types.Unit{
			{Name: UnitContainerd, Enabled: new(true)},
			{Name: UnitKubelet, Enabled: new(true), Contents: new(kubeletUnit(k, n.ProviderIDPrefix))},
			{Name: UnitKubeProxy, Enabled: new(true), Contents: new(kubeProxyUnit(k))},
		}},
	}
	if r := n.Registry; r != nil && r.Host != "" && len(r.CAPEM) > 0 {
		cfg.Storage.Files = append(cfg.Storage.Files, file(registryCAPath(r.Host), 0o644, r.CAPEM))
	}
	if len(n.ServerCAPEM) > 0 {
		cfg.Ignition.Security.TLS.CertificateAuthorities = []types.Resource{{Source: new(DataURL(n.ServerCAPEM))}}
	}
	return cfg, nil
}

// kubeletConfiguration is the kubelet's config file: client certificates from TLS bootstrap
// (rotated), requests authenticated against the cluster's CA and authorized by the
// kube-apiserver, the cgroupfs driver (runc's default), and the pool's taints.
func (n *Node) kubeletConfiguration(k KubeletConfig) ([]byte, error) {
	taints := make([]corev1.Taint, 0, len(k.Taints))
	for _, t := range k.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	c := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: PathCACert},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: new(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: new(false)},
		},
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		CgroupDriver:             "cgroupfs",
		ContainerRuntimeEndpoint: "unix://" + ContainerdSocket,
		RotateCertificates:       true,
		ReadOnlyPort:             0,
		ClusterDomain:            cmpOr(n.ClusterDomain, "cluster.local"),
		ClusterDNS:               n.ClusterDNS,
		RegisterWithTaints:       taints,
		FailSwapOn:               new(false),
		FailCgroupV1:             new(false),
		ResolverConfig:           new("/etc/resolv.conf"),
	}
	return yaml.Marshal(c)
}

// kubeProxyConfiguration is kube-proxy's config file: iptables mode, the pod network as the
// cluster CIDR (traffic from outside it to a Service is masqueraded), and the node's own
// credential, the kubelet's kubeconfig (its client certificate rotated by the kubelet; the
// guest RBAC pkid applies grants the nodes system:node-proxier). Conntrack limits are left as
// the machine has them: they are the host's, not the node's, when the node is a container.
func (n *Node) kubeProxyConfiguration() ([]byte, error) {
	zero := &metav1.Duration{}
	c := kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: kubeproxyv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		ClientConnection: componentbasev1alpha1.ClientConnectionConfiguration{Kubeconfig: PathKubeletKubeconfig},
		Mode:             "iptables",
		ClusterCIDR:      n.PodCIDR,
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore: new(int32(0)), TCPEstablishedTimeout: zero, TCPCloseWaitTimeout: zero,
		},
	}
	return yaml.Marshal(c)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// kubeletPre is PathKubeletPre: sysctls (best effort: a container may not set them all), then
// the cgroup CgroupRootPrefix/<hostname> in every cgroup v1 hierarchy (a new cpuset inherits
// its parent's cpus and mems) or in cgroup v2's one.
const kubeletPre = `#!/bin/sh
# Written by hostplane's Ignition payload; run by kubelet.service before the kubelet.
set -eu
node=$1
/sbin/sysctl --load=` + PathSysctl + ` >/dev/null || echo "hostplane: some sysctls of ` + PathSysctl + ` could not be set" >&2
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  mkdir -p "/sys/fs/cgroup` + CgroupRootPrefix + `/$node"
  exit 0
fi
for h in /sys/fs/cgroup/*/; do
  [ -e "$h/cgroup.procs" ] || continue
  dir=$h` + CgroupRootPrefix + `
  mkdir -p "$dir/$node"
  for f in cpuset.cpus cpuset.mems; do
    if [ -e "$h/$f" ]; then
      [ -s "$dir/$f" ] && [ -n "$(cat "$dir/$f")" ] || cat "$h/$f" > "$dir/$f"
      [ -n "$(cat "$dir/$node/$f")" ] || cat "$dir/$f" > "$dir/$node/$f"
    fi
  done
done
`

// kubeletUnit runs the kubelet once containerd is up: its node labels are the pool's and
// api.LabelCurrentConfig (the config it booted), its
// cgroup root is CgroupRootPrefix/<hostname> (created first in every cgroup v1 hierarchy, or
// under cgroup v2's single one), and it restarts whenever it stops.
// providerIDFlag is the kubelet's --provider-id of a machine whose provider ID is prefix and
// its hostname (systemd's %H), or nothing without a prefix.
func providerIDFlag(prefix string) string {
	if prefix == "" {
		return ""
	}
	return " --provider-id=" + prefix + "%H"
}

func kubeletUnit(k KubeletConfig, providerIDPrefix string) string {
	all := maps.Clone(k.NodeLabels)
	if all == nil {
		all = map[string]string{}
	}
	all[api.LabelCurrentConfig] = api.ConfigLabelValue(k.ConfigHash)
	labels := make([]string, 0, len(all))
	for _, key := range slices.Sorted(maps.Keys(all)) {
		labels = append(labels, key+"="+all[key])
	}
	r := strings.NewReplacer("RELEASE", k.KubeletVersion, "CONTAINERD", UnitContainerd, "PRE", PathKubeletPre,
		"KUBELET", PathKubelet, "CONFIG", PathKubeletConfiguration, "BOOTSTRAP", PathBootstrapKubeconfig,
		"KUBECONFIG", PathKubeletKubeconfig, "CERTDIR", PathKubeletPKI, "CGROUPS", CgroupRootPrefix,
		"LABELS", strings.Join(labels, ","), " PROVIDERID", providerIDFlag(providerIDPrefix))
	return r.Replace(`[Unit]
Description=Kubernetes kubelet (hostplane node, release RELEASE)
Wants=network-online.target
After=network-online.target CONTAINERD
Requires=CONTAINERD

[Service]
ExecStartPre=PRE %H
ExecStart=KUBELET --config=CONFIG --bootstrap-kubeconfig=BOOTSTRAP --kubeconfig=KUBECONFIG --cert-dir=CERTDIR --cgroup-root=CGROUPS/%H --node-labels=LABELS PROVIDERID
Restart=always
RestartSec=2
KillMode=process

[Install]
WantedBy=multi-user.target
`)
}

// kubeProxyUnit runs kube-proxy once the kubelet has its kubeconfig (TLS bootstrap done),
// and restarts it whenever it stops.
func kubeProxyUnit(k KubeletConfig) string {
	r := strings.NewReplacer("RELEASE", k.KubeletVersion, "KUBELETUNIT", UnitKubelet, "PROXY", PathKubeProxy,
		"CONFIG", PathKubeProxyConfiguration, "KUBECONFIG", PathKubeletKubeconfig)
	return r.Replace(`[Unit]
Description=Kubernetes kube-proxy (hostplane node, release RELEASE)
Wants=KUBELETUNIT
After=KUBELETUNIT

[Service]
ExecStartPre=/bin/sh -c 'until [ -s KUBECONFIG ]; do sleep 1; done'
ExecStart=PROXY --config=CONFIG
TimeoutStartSec=0
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
`)
}

// containerdConfig is containerd's config (version 2, containerd 1.6 and later): the CRI
// plugin with the sandbox image, runc under cgroupfs, CNI plugins in CNIBinDir,
// restrict_oom_score_adj (a node in a container may not lower its OOM score) and the
// registry's credential and CA.
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %q
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %q
      conf_dir = "/etc/cni/net.d"
      max_conf_num = 1
`, n.SandboxImage, CNIBinDir) + n.registryConfig()
}

// registryConfig is the CRI plugin's settings for n.Registry: its CA and its credential.
func (n *Node) registryConfig() string {
	r := n.Registry
	if r == nil || r.Host == "" {
		return ""
	}
	out := fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".registry.configs.%[1]q.auth]
      username = %[2]q
      password = %[3]q
`, r.Host, r.Username, r.Password)
	if len(r.CAPEM) > 0 {
		out += fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".registry.configs.%q.tls]
      ca_file = %q
`, r.Host, registryCAPath(r.Host))
	}
	return out
}
