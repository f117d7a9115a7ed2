package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/cgroups"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad/dockercloud"
)

// nodeImage is the node image tools/node-image/build.sh builds (make node-image): Debian
// with systemd, containerd, runc and Ignition, nothing of hostplane's but a first-boot unit
// that applies dockercloud.UserDataPath with Debian's own Ignition.
const nodeImage = dockercloud.DefaultImage

// requireNodeImage fails the test when Docker or the node image is missing: make test
// builds the image (make node-image) before the tests run.
func requireNodeImage(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", nodeImage).CombinedOutput(); err != nil {
		t.Fatalf("no node image %s (build it with `make node-image`): %v: %s", nodeImage, err, out)
	}
}

// dockerBridgeGateway is the address containers on Docker's default bridge reach this host
// at: the bridge's gateway, or (Docker often leaves it out of the network's IPAM config) the
// bridge interface's own IPv4 address.
func dockerBridgeGateway(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "--format",
		`{{range .IPAM.Config}}{{.Gateway}}{{end}}|{{index .Options "com.docker.network.bridge.name"}}`).Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	gw, ifname, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
	if gw = strings.TrimSpace(gw); gw != "" {
		return gw
	}
	ifc, err := net.InterfaceByName(cmp.Or(strings.TrimSpace(ifname), "docker0"))
	if err != nil {
		t.Fatalf("Docker's bridge %q: %v", ifname, err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatalf("Docker's bridge %s has no IPv4 address", ifc.Name)
	return ""
}

// nodeContainer is a real machine a user started: a container of the node image booting the
// userdata it was given.
type nodeContainer struct {
	t            *testing.T
	name, volume string
}

// startNodeContainer starts machine name (also its hostname, and so its Node's name) booting
// userData, as a user of platform none would: docker run with the userdata mounted where the
// image's first boot reads it. Cleanup removes the container, its containerd volume and the
// cgroups its pods left in the host's hierarchies.
func startNodeContainer(t *testing.T, name string, userData []byte) *nodeContainer {
	t.Helper()
	dir := t.TempDir()
	ud := filepath.Join(dir, "userdata.ign")
	if err := os.WriteFile(ud, userData, 0o600); err != nil {
		t.Fatal(err)
	}
	n := &nodeContainer{t: t, name: name, volume: name + "-containerd"}
	args := append([]string{"run", "-d", "--name", name, "--hostname", name, "--label", "dev.hostplane.e2e=" + t.Name()}, dockercloud.RunFlags...)
	args = append(args, "-v", n.volume+":/var/lib/containerd", "-v", ud+":"+dockercloud.UserDataPath+":ro", nodeImage)
	t.Cleanup(n.remove)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v: %s", err, out)
	}
	return n
}

// exec runs a command in the machine and returns its output.
func (n *nodeContainer) exec(args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", n.name}, args...)...).CombinedOutput()
	return string(out), err
}

// journal is the machine's log of unit (for a failure message).
func (n *nodeContainer) journal(unit string) string {
	out, _ := n.exec("journalctl", "--no-pager", "-n", "40", "-u", unit)
	return out
}

func (n *nodeContainer) remove() {
	if n.t.Failed() {
		for _, u := range []string{"hostplane-ignition", "kubelet", "containerd"} {
			n.t.Logf("%s: journal of %s:\n%s", n.name, u, n.journal(u))
		}
	}
	_ = exec.Command("docker", "rm", "-f", "-v", n.name).Run()
	_ = exec.Command("docker", "volume", "rm", "-f", n.volume).Run()
	removeNodeCgroups(n.t, n.name)
}

// removeNodeCgroups removes the cgroup <ignition.CgroupRootPrefix>/<name> the node's kubelet
// made in every hierarchy of this host, and the prefix once no node is left under it.
func removeNodeCgroups(t *testing.T, name string) {
	if err := cgroups.RemoveEverywhere(filepath.Join(ignition.CgroupRootPrefix, name)); err != nil {
		t.Logf("cgroups of %s stay: %v", name, err)
	}
	for _, h := range cgroups.Hierarchies() {
		_ = os.Remove(filepath.Join(h, ignition.CgroupRootPrefix)) // fails while another node is there
	}
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestRealNode_PlatformNoneMachineBootsTheUserdataIntoAReadyNode plays a user of platform
// none: a cluster and a pool of their own machines; the userdata the API hands out, given to
// a stock Debian machine (systemd, containerd, Ignition 2.14, which reads spec 3.3.0 at
// most), makes it a Ready node of the pool: Ignition fetches the payload and the release's
// kubelet (SHA-512 checked) from the cluster's Ignition server, the kubelet bootstraps its
// client certificate with the pool's token, pkid approves it with no Machine behind it, and
// nodepoold counts the node in the pool's status.
func TestRealNode_PlatformNoneMachineBootsTheUserdataIntoAReadyNode(t *testing.T) {
	rel := release.Latest()
	testenv.RequireBinaries(t, rel, release.Components()...)
	for _, b := range release.NodeBinaries() {
		if _, err := rel.Binary(b); err != nil {
			t.Fatal(err)
		}
	}
	requireNodeImage(t)
	host := dockerBridgeGateway(t)
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.InfraHost, cfg.GuestImagesDir = host, testenv.GuestImagesDir(t) })
	if s.Registry == nil {
		t.Fatal("hostplane dev started no registry (make registry)")
	}
	t.Cleanup(func() { s.Stop(context.Background()) })

	const cl, pool = "metal", "byo"
	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+rel.Version+`"},"platform":{"type":"none"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"`+pool+`","spec":{"replicas":2,"release":{"version":"`+rel.Version+`"},"management":{"upgradeType":"Replace"},"nodeLabels":{"tier":"metal"}}}`, nil); code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("create pool: %d %s", code, body)
	}
	var userData []byte
	var answer string
	testenv.Eventually(t, 2*time.Minute, func() bool {
		code, body := c.do("GET", "/v1/clusters/"+cl+"/nodepools/"+pool+"/userdata", "", nil)
		userData, answer = body, string(body)
		return code == http.StatusOK
	}, "the pool's userdata was never handed out: %s", lazyString{&answer})
	stub, err := ignition.ParseStub(userData)
	if err != nil || !bytes.Contains(userData, []byte(`"version":"`+ignition.StubVersion+`"`)) {
		t.Fatalf("userdata is not a %s stub (%v): %s", ignition.StubVersion, err, userData)
	}
	if !strings.HasPrefix(stub.URL, "https://"+host+":") {
		t.Fatalf("the stub points at %s, not at the address the machines reach (%s)", stub.URL, host)
	}

	// Two machines booting the same userdata: each becomes a node of its own pod range.
	suffix := randomSuffix()
	names := []string{"byo-" + suffix + "-a", "byo-" + suffix + "-b"}
	machines := make([]*nodeContainer, len(names))
	for i, name := range names {
		machines[i] = startNodeContainer(t, name, userData)
	}
	kc := c.kubeClient(cl)
	nodes := make([]*corev1.Node, len(names))
	for i := range names {
		nodes[i] = waitNodeReady(t, kc, machines[i])
	}
	if a, b := nodes[0].Spec.PodCIDRs[0], nodes[1].Spec.PodCIDRs[0]; a == b {
		t.Errorf("both nodes have pod range %s", a)
	}
	name, node, got := names[0], machines[0], nodes[0]
	if v := got.Status.NodeInfo.KubeletVersion; v != "v"+rel.Version {
		t.Errorf("kubelet version %s, want v%s", v, rel.Version)
	}
	if got.Labels[api.LabelNodePool] != pool || got.Labels["tier"] != "metal" {
		t.Errorf("node labels %v, want the pool's", got.Labels)
	}
	if rt := got.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") {
		t.Errorf("container runtime %q, want the machine's containerd", rt)
	}
	// The kubelet's client certificate came from TLS bootstrap, approved by pkid.
	csrs, err := kc.CertificatesV1().CertificateSigningRequests().List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	approved := false
	for _, r := range csrs.Items {
		for _, cond := range r.Status.Conditions {
			approved = approved || (cond.Type == "Approved" && strings.Contains(cond.Message, "approved by pkid: node "+name+" joins platform-none node pool "+pool))
		}
	}
	if !approved {
		t.Errorf("no CSR of the node was approved by pkid: %s", lazyJSON{&csrs.Items})
	}
	// The machine's Ignition read a config it understands: spec 3.3.0, the kubelet checked.
	if out, err := node.exec("sh", "-c", "sha512sum "+ignition.PathKubelet); err != nil || len(out) < 128 {
		t.Errorf("kubelet on the machine: %v %s", err, out)
	}
	// The pool counts the nodes as ready and updated (their config label names the pool's hash).
	c.waitPoolReady(cl, pool, int32(len(names)), 2*time.Minute)
	t.Logf("node %s: kubelet %s, %s, OS %s", name, got.Status.NodeInfo.KubeletVersion, got.Status.NodeInfo.ContainerRuntimeVersion, got.Status.NodeInfo.OSImage)

	// A real container runs on it: the example image, pulled from hostplane's registry with
	// the credential of the payload, in a sandbox of the registry's pause image.
	image := s.Registry.Ref(dev.EchoRepo, dev.GuestTag)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default", Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "echo", Image: image,
			Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		}}},
	}
	pod.Spec.NodeName = name
	pod = runPod(t, kc, pod, node)
	if pod.Status.PodIP == "" || !podInNodeRange(pod, got) {
		t.Errorf("pod IP %q, want one of node %s's pod range %v", pod.Status.PodIP, name, got.Spec.PodCIDRs)
	}
	// kubectl logs and exec reach the kubelet; the process in the container is the real one.
	logs, err := c.kubectl(cl, "", "logs", "echo")
	if err != nil || !strings.Contains(logs, "serving echo on :8080") {
		t.Errorf("kubectl logs: %v: %s", err, logs)
	}
	out, err := c.kubectl(cl, "", "exec", "echo", "--", "/echo", "http://127.0.0.1:8080/")
	if err != nil || strings.TrimSpace(out) != "echo" {
		t.Errorf("kubectl exec: %v: %q, want the pod's own answer", err, out)
	}
	// kubectl port-forward: this host reaches the pod's port through the kubelet.
	if got := c.portForwardGet(cl, "pod/echo", 8080, "/"); strings.TrimSpace(got) != "echo" {
		t.Errorf("through kubectl port-forward: %q, want the pod's name", got)
	}

	// A pod on the other node reaches the echo pod by its pod IP, with its own address (no
	// masquerade between pods); a Service reaches the echo pod through kube-proxy: by its
	// cluster IP and DNS names from that pod, and by its node port from this host.
	checkServiceOnRealNode(t, c, cl, pod, machines[1], got, image)
}

// waitNodeReady waits until machine n is a Ready node with a pod range and returns it.
func waitNodeReady(t *testing.T, kc kubernetes.Interface, n *nodeContainer) *corev1.Node {
	t.Helper()
	var got *corev1.Node
	testenv.Eventually(t, 4*time.Minute, func() bool {
		node, err := kc.CoreV1().Nodes().Get(ctx(t), n.name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		got = node
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return len(node.Spec.PodCIDRs) > 0
			}
		}
		return false
	}, "machine %s never became a Ready node with a pod range: %s\nfirst boot:\n%s\nkubelet:\n%s", n.name, lazyJSON{&got},
		lazyFunc(func() string { return n.journal("hostplane-ignition") }), lazyFunc(func() string { return n.journal("kubelet") }))
	return got
}

// podInNodeRange says whether pod's IP is in node's pod range.
func podInNodeRange(pod *corev1.Pod, node *corev1.Node) bool {
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || len(node.Spec.PodCIDRs) == 0 {
		return false
	}
	p, err := netip.ParsePrefix(node.Spec.PodCIDRs[0])
	return err == nil && p.Contains(ip)
}

// runPod creates pod and waits until its one container is running and ready (on node n,
// whose containerd's journal a failure shows).
func runPod(t *testing.T, kc kubernetes.Interface, pod *corev1.Pod, n *nodeContainer) *corev1.Pod {
	t.Helper()
	if _, err := kc.CoreV1().Pods(pod.Namespace).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() bool {
		p, err := kc.CoreV1().Pods(pod.Namespace).Get(ctx(t), pod.Name, metav1.GetOptions{})
		if err == nil {
			pod = p
		}
		return err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	}, "pod %s never ran: %s\ncontainerd:\n%s", pod.Name, lazyJSON{&pod}, lazyFunc(func() string { return n.journal("containerd") }))
	return pod
}

// checkServiceOnRealNode starts a client pod on machine n (another node than echo's) and
// checks that it reaches the echo pod at its pod IP, seen from its own pod IP (the echo
// server logs the remote address); then puts Service echo (port 80 to the echo pod's 8080,
// type NodePort) in front of it and checks kube-proxy routes to it and the guest's DNS
// names it: the client reaches http://<cluster IP>/ and http://echo.default.svc.../, this
// host http://<echo's node IP>:<node port>/.
func checkServiceOnRealNode(t *testing.T, c *client, cl string, echo *corev1.Pod, n *nodeContainer, node *corev1.Node, image string) {
	t.Helper()
	kc := c.kubeClient(cl)
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: n.name, Containers: []corev1.Container{{Name: "client", Image: image}}},
	}
	client = runPod(t, kc, client, n)
	var out string
	var err error
	podURL := "http://" + net.JoinHostPort(echo.Status.PodIP, "8080") + "/"
	testenv.Eventually(t, time.Minute, func() bool {
		out, err = c.kubectl(cl, "", "exec", "client", "--", "/echo", podURL)
		return err == nil && strings.TrimSpace(out) == "echo"
	}, "the echo pod on %s never answered at %s from a pod on %s: %q %v\nnetd:\n%s", echo.Spec.NodeName, podURL, n.name,
		lazyString{&out}, lazyFunc(func() string { return fmt.Sprint(err) }),
		lazyFunc(func() string {
			out, _ := c.kubectl(cl, "", "-n", "kube-system", "logs", "-l", "k8s-app=hostplane-netd", "--tail=20", "--prefix")
			routes, _ := n.exec("ip", "route")
			return out + "\nroutes on " + n.name + ":\n" + routes
		}))
	if logs, err := c.kubectl(cl, "", "logs", "echo"); err != nil || !strings.Contains(logs, "from "+client.Status.PodIP+":") {
		t.Errorf("the echo pod saw the client (%s) from another address (masqueraded between pods?): %v\n%s", client.Status.PodIP, err, logs)
	}
	svc, err := kc.CoreV1().Services("default").Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() bool {
		out, err = c.kubectl(cl, "", "exec", "client", "--", "/echo", "http://"+svc.Spec.ClusterIP+"/")
		return err == nil && strings.TrimSpace(out) == "echo"
	}, "the Service's cluster IP %s never answered from a pod: %q %v\nkube-proxy:\n%s", svc.Spec.ClusterIP, lazyString{&out}, lazyFunc(func() string { return fmt.Sprint(err) }),
		lazyFunc(func() string { return n.journal("kube-proxy") }))

	// DNS: componentd's CoreDNS (from hostplane's registry) answers for the Service's name;
	// it reads the Services through the kubernetes Service, whose endpoint componentd points
	// at the cluster's endpoint, so a pod's in-cluster configuration works too.
	testenv.Eventually(t, 2*time.Minute, func() bool {
		d, err := kc.AppsV1().Deployments("kube-system").Get(ctx(t), "coredns", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas >= 1
	}, "CoreDNS never became available in the guest:\n%s", lazyFunc(func() string {
		out, _ := c.kubectl(cl, "", "-n", "kube-system", "get", "deploy,pods,endpointslices", "-o", "wide")
		logs, _ := c.kubectl(cl, "", "-n", "kube-system", "logs", "deploy/coredns", "--tail=30")
		return out + "\n" + logs
	}))
	for _, name := range []string{"echo.default.svc." + api.ClusterDomain, "echo.default.svc", "echo"} {
		testenv.Eventually(t, time.Minute, func() bool {
			out, err = c.kubectl(cl, "", "exec", "client", "--", "/echo", "http://"+name+"/")
			return err == nil && strings.TrimSpace(out) == "echo"
		}, "the Service's name %s never answered from a pod: %q %v", name, lazyString{&out}, lazyFunc(func() string { return fmt.Sprint(err) }))
	}

	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(ip, fmt.Sprint(svc.Spec.Ports[0].NodePort)))
	hc := &http.Client{Timeout: 5 * time.Second}
	var answer string
	testenv.Eventually(t, time.Minute, func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			answer = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer = string(b)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(answer) == "echo"
	}, "the Service's node port never answered at %s: %s", url, lazyString{&answer})
}

// portForwardGet runs kubectl port-forward to target's port on a free local port, GETs path
// through it and returns the answer ("" when it fails; the failure is logged).
func (c *client) portForwardGet(cluster, target string, port int, path string) string {
	c.t.Helper()
	kcPath := c.kubeconfigFile(cluster)
	pctx, cancel := context.WithTimeout(ctx(c.t), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pctx, "kubectl", "--kubeconfig", kcPath, "port-forward", target, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	// "Forwarding from 127.0.0.1:41234 -> 8080"
	line, err := bufio.NewReader(stdout).ReadString('\n')
	_, local, ok := strings.Cut(line, "Forwarding from ")
	local, _, _ = strings.Cut(local, " ->")
	if err != nil || !ok {
		c.t.Logf("kubectl port-forward: %q %v: %s", line, err, stderr.String())
		return ""
	}
	req, _ := http.NewRequestWithContext(pctx, http.MethodGet, "http://"+strings.TrimSpace(local)+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Logf("GET through port-forward: %v: %s", err, stderr.String())
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// lazyFunc formats a value only when a failure message is printed.
type lazyFunc func() string

func (f lazyFunc) String() string { return f() }
