package mgmtcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/process"
)

// Node is one kubelet node: a network namespace with a containerd and a kubelet.
type Node struct {
	// Index is 1-based; Name is the Kubernetes node name (<Name>-n<Index>).
	Index int
	Name  string
	// IP is the node's address on the switch; PodCIDR the range its pods get addresses from.
	IP, PodCIDR string
	// Netns is the node's network namespace (a name under /run/netns).
	Netns string
	// Dir holds the node's containerd and kubelet state.
	Dir string
	// ContainerdSocket is the node's containerd (CRI) socket.
	ContainerdSocket string

	containerd, kubelet *process.Process
	kubeletSpec         process.Spec
}

const (
	kubeletHealthzPort = 10248
	criNamespace       = "k8s.io"
)

func (c *Cluster) newNode(i int) *Node {
	dir := filepath.Join(c.cfg.Dir, "n"+strconv.Itoa(i))
	return &Node{
		Index: i, Name: nodeNetns(c.cfg.Name, i),
		IP: nodeIP(i), PodCIDR: podCIDR(i),
		Netns: nodeNetns(c.cfg.Name, i), Dir: dir,
		ContainerdSocket: filepath.Join(dir, "containerd", "containerd.sock"),
	}
}

// containerdConfig is containerd 1.6's configuration (version 2): every path under the
// node's dir, runc's state too; the CRI plugin with cgroupfs, the pause image built here,
// restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE: without it every sandbox fails
// with "can't get final child's PID from pipe: EOF"), and the node's CNI config.
func (n *Node) containerdConfig(cniConfDir string) string {
	d := filepath.Join(n.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %q
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    disable_apparmor = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = %q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %q
      conf_dir = %q
      max_conf_num = 1
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.ContainerdSocket,
		filepath.Join(d, "opt"), pauseImage, filepath.Join(d, "runc"), cniBinDir, cniConfDir)
}

// cniConfig is the node's network: a bridge with the node as the pods' gateway, addresses
// from the node's range, leases kept in the node's dir.
func (n *Node) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      cniBridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(n.Dir, "cni-ipam"),
			},
		}},
	}, "", "  ")
}

// kubeletConfig: cgroupfs under the node's own cgroup root (two kubelets share the host's
// hierarchies), swap and cgroup v1 tolerated, fast heartbeats so a lost node is noticed
// within the cluster's node-monitor grace period, eviction thresholds that never fire on a
// busy test machine, no DNS from the host (the cluster's own DNS server on the host's link
// address instead: dns.go), pod logs in the node's dir.
func (n *Node) kubeletConfig(caFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: %s
healthzPort: %d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
resolvConf: ""
clusterDNS: [%s]
clusterDomain: %s
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 2s
nodeLeaseDurationSeconds: 8
syncFrequency: 10s
fileCheckFrequency: 10s
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, n.IP, n.IP, kubeletHealthzPort, caFile, n.Name, n.ContainerdSocket, filepath.Join(n.Dir, "pods-logs"), hostIP, ClusterDomain)
}

// start writes the node's configuration, starts containerd in the node's namespace, imports
// the images, and starts the kubelet. It does not wait for the Node to be Ready.
func (c *Cluster) startNode(ctx context.Context, n *Node, images []string) error {
	cniConf := filepath.Join(n.Dir, "cni")
	for _, d := range []string{n.Dir, cniConf, filepath.Join(n.Dir, "kubelet"), filepath.Join(n.Dir, "pods-logs"), filepath.Join(n.Dir, "containerd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := makeCgroupRoot(n.Name); err != nil {
		return err
	}
	cni, err := n.cniConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-"+cniNetwork+".conflist"), cni, 0o644); err != nil {
		return err
	}
	ctrdConf := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(ctrdConf, []byte(n.containerdConfig(cniConf)), 0o644); err != nil {
		return err
	}
	nsenter := []string{"--net=" + filepath.Join(netnsDir, n.Netns), "--"}
	n.containerd, err = c.startProcess(ctx, process.Spec{
		Name:    n.Name + "-containerd",
		Path:    c.bins.nsenter,
		Args:    append(append([]string{}, nsenter...), c.bins.containerd, "--config", ctrdConf),
		LogFile: filepath.Join(n.Dir, "containerd.log"),
		Probe:   socketProbe(n.ContainerdSocket),
	})
	if err != nil {
		return err
	}
	for _, img := range images {
		if err := n.importImage(ctx, c.bins.ctr, img); err != nil {
			return err
		}
	}
	kubeletConf := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConf, []byte(n.kubeletConfig(filepath.Join(c.kube.Dir, "pki", "ca.crt"))), 0o644); err != nil {
		return err
	}
	n.kubeletSpec = process.Spec{
		Name: n.Name + "-kubelet",
		Path: c.bins.nsenter,
		Args: append(append([]string{}, nsenter...), c.bins.kubelet,
			"--config="+kubeletConf,
			"--kubeconfig="+c.kube.KubeconfigPath,
			"--root-dir="+filepath.Join(n.Dir, "kubelet"),
			"--hostname-override="+n.Name,
			"--node-ip="+n.IP,
			"--v=1",
		),
		LogFile: filepath.Join(n.Dir, "kubelet.log"),
		Probe:   process.HTTPProbe(nil, "http://"+net.JoinHostPort(n.IP, strconv.Itoa(kubeletHealthzPort))+"/healthz", nil),
	}
	n.kubelet, err = c.startProcess(ctx, n.kubeletSpec)
	return err
}

// importImage imports a docker or OCI archive into the node's containerd, where the CRI
// plugin sees it.
func (n *Node) importImage(ctx context.Context, ctr, archive string) error {
	cmd := exec.CommandContext(ctx, ctr, "--address", n.ContainerdSocket, "-n", criNamespace, "images", "import", archive)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr import %s into %s: %w: %s", archive, n.Name, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// socketProbe passes once a unix socket accepts connections.
func socketProbe(path string) process.Probe {
	return func(ctx context.Context) error {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := d.DialContext(dctx, "unix", path)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}
