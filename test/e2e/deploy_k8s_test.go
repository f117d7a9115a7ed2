package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/leaderendpoint"
	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
	"github.com/hostplane/hostplane/services/infrad/lb"
	"github.com/hostplane/hostplane/services/localcloud"
)

// EnvDeployTest runs TestDeployK8s_DevOverlayOnRealKubelets (make mgmt-deploy-test, which
// make test runs after mgmt-kuberuntime-test: it needs root, the release binaries, the
// kubelet, containerd and the images `make images` builds).
const EnvDeployTest = "HOSTPLANE_MGMT_DEPLOY_TEST"

// The images deploy/k8s runs, as `make images` tags them: hostplane/<name>:<tag>.
var deployImages = []string{"nats", "hostplane", "clusterd", "nodepoold", "componentd", "pkid", "infrad", "ignitiond", "gateway", "localcloud"}

// deployNodes: three kubelet nodes, so the NATS members and each daemon's two replicas spread.
const deployNodes = 3

// The dev overlay's admin token (overlays/dev: never used elsewhere).
const devAdminToken = "dev-admin-token-not-secret"

// TestDeployK8s_DevOverlayOnRealKubelets_EverythingBecomesAvailableAndServesAHostedCluster
// applies deploy/k8s/overlays/dev, as an operator would, onto a real management cluster
// (pkg/mgmtcluster: kubelets on containerd in network namespaces) with the FROM-scratch
// images of `make images` imported into its nodes, and checks what the operator looks at:
// the NATS StatefulSet's three members Ready on claims bound to volumes, the bootstrap Job
// complete, every daemon's Deployment and the gateway Available; then, through the gateway's
// pod, a cluster created with the API becomes Available with its control plane running as
// pods (componentd's kubernetes runtime) and its kubeconfig works; a node pool's machines,
// provisioned in the dev overlay's local cloud pod, join as Ready nodes and follow infrad's
// endpoint across a takeover; the gateway follows
// clusterd's leadership when the leading pod is killed; the cluster hibernates (no pod left)
// and a plain GET on its kubeconfig wakes it; and deleting the cluster through the gateway
// removes it, its namespace and its machines.
func TestDeployK8s_DevOverlayOnRealKubelets_EverythingBecomesAvailableAndServesAHostedCluster(t *testing.T) {
	if os.Getenv(EnvDeployTest) == "" {
		t.Skip("needs root, containerd, the kubelet and `make images`: run `make mgmt-deploy-test`")
	}
	tag := os.Getenv("HOSTPLANE_IMAGE_TAG")
	if tag == "" {
		tag = "dev"
	}
	rel := release.Latest()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Minute)
	defer cancel()

	// The images: hostplane's, saved from docker, and the release's for the hosted control
	// planes, written here around the cached binaries.
	dir := t.TempDir()
	archives := []string{saveImages(ctx, t, tag, filepath.Join(dir, "hostplane-images.tar"))}
	rels, err := mgmtcluster.ReleaseImages(rel, dir)
	if err != nil {
		t.Fatal(err)
	}
	archives = append(archives, rels...)

	mc, err := mgmtcluster.Start(ctx, mgmtcluster.Config{Nodes: deployNodes, Release: rel, APIServerPort: 443}, archives...)
	if err != nil {
		t.Fatalf("management cluster: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer scancel()
		if err := mc.Stop(sctx); err != nil {
			t.Errorf("stop the management cluster: %v", err)
		}
		if left := mgmtcluster.Leftovers(mgmtcluster.Config{}); len(left) > 0 {
			t.Errorf("left on the host after Stop: %v", left)
		}
	})
	if err := mc.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	// One volume per NATS member and one for the local cloud (the dev overlay claims 1Gi
	// each), and one for the hosted cluster's etcd (componentd claims 8Gi).
	if err := mc.AddHostPathVolumes(ctx, 5, "10Gi"); err != nil {
		t.Fatal(err)
	}
	t.Logf("management cluster: %d kubelet nodes Ready, images imported, in %s", deployNodes, time.Since(begin).Round(time.Millisecond))
	cs, err := mc.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
			defer dcancel()
			for _, ns := range []string{manifestNamespace, api.ControlPlaneNamespace("demo")} {
				t.Logf("pods of %s:\n%s", ns, mc.DescribePods(dctx, ns, 15))
			}
		}
	})

	applied := time.Now()
	applyDevOverlay(ctx, t, mc, tag)
	t.Logf("deploy/k8s/overlays/dev applied in %s", time.Since(applied).Round(time.Millisecond))

	waitStatefulSet(ctx, t, cs, "nats", 3)
	t.Logf("NATS: 3 members Ready, claims Bound, %s after apply", time.Since(applied).Round(time.Millisecond))
	waitJob(ctx, t, cs, "nats-bootstrap")
	t.Logf("nats-bootstrap complete %s after apply", time.Since(applied).Round(time.Millisecond))
	for _, d := range []string{"clusterd", "nodepoold", "componentd", "pkid", "infrad", "ignitiond", "gateway"} {
		waitDeploymentAvailable(ctx, t, cs, d)
	}
	waitStatefulSet(ctx, t, cs, "localcloud", 1)
	t.Logf("every Deployment Available %s after apply (%s after the start)", time.Since(applied).Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	// The gateway, reached as a host reaches a pod: the host routes every node's pod range.
	gw := gatewayURL(ctx, t, cs)
	c := newClient(t, gw, devAdminToken, "")
	created := time.Now()
	body := fmt.Sprintf(`{"name":"demo","spec":{"release":{"version":%q},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`, rel.Version)
	if code, b := c.do("POST", "/v1/clusters", body, nil); code != http.StatusAccepted {
		t.Fatalf("create the cluster through the gateway: %d %s", code, b)
	}
	c.waitCondition("demo", api.ConditionAvailable, api.ConditionTrue, 4*time.Minute)
	t.Logf("cluster demo Available %s after create (through the gateway, control plane as pods)", time.Since(created).Round(time.Millisecond))
	checkControlPlanePods(ctx, t, cs, "demo")
	// The endpoint is infrad's load balancer, in the leading infrad's pod, under the name of
	// the Service infrad-endpoints, which that infrad keeps at its pod's address; the test
	// resolves it through the cluster DNS as a pod would. The call is retried as a user
	// would, and each failure logged.
	guest, guestCfg := guestClient(t, c, mc, "demo")
	server := guestCfg.Host
	if want := "infrad-endpoints." + manifestNamespace + ".svc"; !strings.Contains(server, "//"+want+":") {
		t.Errorf("the kubeconfig's server is %s, want the Service %s", server, want)
	}
	guestVersion := func(what string) {
		t.Helper()
		var v *version.Info
		poll(ctx, t, 2*time.Minute, what, func(ctx context.Context) (bool, string) {
			v, err = guest.Discovery().ServerVersion()
			if err != nil {
				t.Logf("GET /version with the cluster's kubeconfig: %v", err)
				return false, err.Error()
			}
			return true, ""
		})
		if v.GitVersion != "v"+rel.Version {
			t.Errorf("hosted kube-apiserver is %s, want v%s", v.GitVersion, rel.Version)
		}
	}
	guestVersion("the cluster's kubeconfig works (GET /version)")
	t.Logf("kubeconfig works: %s answers through the leading infrad's load balancer", server)
	checkIgnitionEndpoint(ctx, t, c, mc, "demo", guestCfg)

	// A node pool: infrad provisions its machines in the local cloud (the dev overlay's
	// StatefulSet localcloud); they boot from the Ignition endpoint and join through the
	// cluster's endpoint, both by their Services' names, resolved by the cluster DNS.
	pooled := time.Now()
	poolBody := fmt.Sprintf(`{"name":"workers","spec":{"replicas":2,"release":{"version":%q},"management":{"upgradeType":"Replace"}}}`, rel.Version)
	if code, b := c.do("POST", "/v1/clusters/demo/nodepools", poolBody, nil); code != http.StatusAccepted {
		t.Fatalf("create the node pool through the gateway: %d %s", code, b)
	}
	c.waitPoolReady("demo", "workers", 2, poolReady)
	nodes := readyNodes(t, guest, "workers")
	if len(nodes) != 2 {
		t.Fatalf("Ready nodes of pool workers = %d, want 2", len(nodes))
	}
	t.Logf("node pool workers: 2 machines in the local cloud pod, 2 Ready nodes %s after POST", time.Since(pooled).Round(time.Millisecond))

	// The leading infrad pod is killed: the other replica takes over, listens on the
	// cluster's port and points infrad-endpoints at itself, so the same kubeconfig works again.
	infradLeader, answer := gatewayReplica(t, c, "infrad")
	if infradLeader == "" {
		t.Fatalf("the gateway's /healthz names no leading infrad replica: %s", answer)
	}
	killed := time.Now()
	killPodAt(ctx, t, cs, "infrad", infradLeader)
	// The name moves once the other replica leads: it writes the slice with its address.
	oldIP, _, _ := net.SplitHostPort(infradLeader)
	var newIP string
	poll(ctx, t, 2*time.Minute, "infrad-endpoints names the replica that took over", func(ctx context.Context) (bool, string) {
		es, err := cs.DiscoveryV1().EndpointSlices(manifestNamespace).Get(ctx, leaderendpoint.SliceName("infrad-endpoints"), metav1.GetOptions{})
		if err != nil || len(es.Endpoints) != 1 || len(es.Endpoints[0].Addresses) != 1 {
			return false, fmt.Sprintf("slice: %v %+v", err, es)
		}
		newIP = es.Endpoints[0].Addresses[0]
		return newIP != oldIP, "the slice still names " + newIP
	})
	moved := time.Since(killed)
	guestVersion("the same kubeconfig works through the infrad that took over")
	t.Logf("infrad's leader %s killed; infrad-endpoints named the other replica (%s) %s later, and the same kubeconfig answered through it %s after the kill",
		oldIP, newIP, moved.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	// The machines dial the same name: each node's kubelet renews its Lease through the
	// replica that took over (its connection to the dead pod broke; a new one resolves the
	// name again).
	renewedAfter := killed.Add(moved)
	poll(ctx, t, 2*time.Minute, "every node renews its Lease through the infrad that took over", func(ctx context.Context) (bool, string) {
		for _, n := range nodes {
			l, err := guest.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(renewedAfter) {
				return false, fmt.Sprintf("node %s's Lease last renewed %v", n.Name, l.Spec.RenewTime)
			}
		}
		return true, ""
	})
	if n := len(readyNodes(t, guest, "workers")); n != 2 {
		t.Errorf("Ready nodes of pool workers after the infrad takeover = %d, want 2", n)
	}
	t.Logf("both nodes renewed their Leases through the new infrad leader %s after the kill", time.Since(killed).Round(time.Millisecond))

	// Both replicas of every daemon are Ready (Available above needs both: maxUnavailable
	// 0); the gateway routes to the leader. Delete the leading clusterd pod with grace period
	// 0 (the kubelet stops it at once; it hands its lease over as it stops): the standby takes
	// over, the gateway follows it, and the Deployment replaces the pod.
	leader, answer := gatewayReplica(t, c, "clusterd")
	if leader == "" {
		t.Fatalf("the gateway's /healthz names no leading clusterd replica: %s", answer)
	}
	killed = time.Now()
	killPodAt(ctx, t, cs, "clusterd", leader)
	var now string
	poll(ctx, t, 2*time.Minute, "the gateway serves clusterd's API from the other replica", func(context.Context) (bool, string) {
		code, b := c.do("GET", "/v1/clusters/demo", "", nil)
		if code != http.StatusOK {
			return false, fmt.Sprintf("GET /v1/clusters/demo: %d %s", code, b)
		}
		if now, answer = gatewayReplica(t, c, "clusterd"); now == "" || now == leader {
			return false, "the gateway routes clusterd to " + leader + " still, or to none: " + answer
		}
		return true, ""
	})
	t.Logf("clusterd's leader %s killed; the gateway served the cluster from %s %s later", leader, now, time.Since(killed).Round(time.Millisecond))
	waitDeploymentAvailable(ctx, t, cs, "clusterd")

	// Hibernate through the gateway: the control plane's workloads scale to 0 (no pod left,
	// etcd's claim kept) and the machines power off. A plain GET with the same kubeconfig
	// wakes it (infrad's balancer holds the connection until kube-apiserver's pod answers)
	// and returns the object written before; the same nodes come back Ready.
	writeConfigMaps(t, guest, "before-hibernation")
	if code, b := c.do("PATCH", "/v1/clusters/demo", `{"spec":{"hibernation":{"enabled":true}}}`, nil); code != http.StatusOK {
		t.Fatalf("hibernate through the gateway: %d %s", code, b)
	}
	hibernating := time.Now()
	c.waitCondition("demo", api.ConditionHibernated, api.ConditionTrue, 3*time.Minute)
	poll(ctx, t, 2*time.Minute, "no pod of demo's control plane left, its machines powered off", func(ctx context.Context) (bool, string) {
		pods, err := cs.CoreV1().Pods(api.ControlPlaneNamespace("demo")).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false, fmt.Sprintf("pods: %v, %d left", err, len(pods.Items))
		}
		for _, m := range localCloudMachines(ctx, t, cs, "demo") {
			if !m.PoweredOff {
				return false, fmt.Sprintf("machine %s is %s", m.Name, m.State)
			}
		}
		return true, ""
	})
	t.Logf("cluster demo Hibernated, no pod left, machines powered off %s after the PATCH", time.Since(hibernating).Round(time.Millisecond))
	// The GET is a plain kubectl's: no client timeout short of the balancer's hold (kubectl
	// sets none; the balancer holds the connection until kube-apiserver's pod answers, for up
	// to lb.WakeHold), but client-go's 10 s TLS handshake timeout, which a wake slower than that outlasts (the balancer forwards the
	// handshake only to a ready apiserver). A user then runs the command again, and so does
	// the test; each attempt is logged (docs/hibernation.md).
	wakeCfg := rest.CopyConfig(guestCfg)
	wakeCfg.Timeout = lb.WakeHold + 15*time.Second
	waker, err := kubernetes.NewForConfig(wakeCfg)
	if err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	var got *corev1.ConfigMap
	attempts := 0
	poll(ctx, t, 2*time.Minute, "a GET on the hibernated cluster answers with the ConfigMap written before", func(ctx context.Context) (bool, string) {
		attempts++
		began := time.Now()
		got, err = waker.CoreV1().ConfigMaps("default").Get(ctx, "before-hibernation", metav1.GetOptions{})
		if err != nil {
			t.Logf("GET %d on the waking cluster failed after %s: %v", attempts, time.Since(began).Round(time.Millisecond), err)
			return false, err.Error()
		}
		return true, ""
	})
	if got.Data["written"] != "before-hibernation" {
		t.Fatalf("GET on the woken cluster: %v; want the ConfigMap written before", got.Data)
	}
	t.Logf("GETs on the hibernated cluster woke it; attempt %d answered, %s after the first", attempts, time.Since(woke).Round(time.Millisecond))
	c.waitCondition("demo", api.ConditionAvailable, api.ConditionTrue, 3*time.Minute)
	poll(ctx, t, 3*time.Minute, "the same nodes Ready again", func(ctx context.Context) (bool, string) {
		back := readyNodes(t, guest, "workers")
		names := make([]string, 0, len(back))
		for _, n := range back {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		want := []string{nodes[0].Name, nodes[1].Name}
		slices.Sort(want)
		return slices.Equal(names, want), fmt.Sprintf("Ready nodes %v, want %v", names, want)
	})
	t.Logf("cluster demo Available and both nodes Ready again %s after the first GET", time.Since(woke).Round(time.Millisecond))

	// Deleting the cluster through the gateway removes it and its namespace with every pod,
	// Secret and claim in it.
	deleted := time.Now()
	if code, b := c.do("DELETE", "/v1/clusters/demo", "", nil); code != http.StatusAccepted {
		t.Fatalf("delete the cluster through the gateway: %d %s", code, b)
	}
	ns := api.ControlPlaneNamespace("demo")
	poll(ctx, t, 4*time.Minute, "cluster demo and namespace "+ns+" gone", func(ctx context.Context) (bool, string) {
		if _, code := c.cluster("demo"); code != http.StatusNotFound {
			return false, fmt.Sprintf("GET /v1/clusters/demo: %d", code)
		}
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("namespace %s: %v", ns, err)
		}
		if left := localCloudMachines(ctx, t, cs, "demo"); len(left) > 0 {
			return false, fmt.Sprintf("the local cloud still runs %d machines of demo: %+v", len(left), left)
		}
		return true, ""
	})
	t.Logf("cluster demo and namespace %s gone %s after DELETE; whole test %s", ns, time.Since(deleted).Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
}

// guestClient is a client of the hosted cluster from the kubeconfig the API hands out, whose
// server names a Service: the test resolves it through the management cluster's DNS, as a
// pod (or a machine whose DNS forwards the cluster's domain) would. It returns the server URL.
func guestClient(t *testing.T, c *client, mc *mgmtcluster.Cluster, cluster string) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	cfg := c.restConfig(cluster)
	cfg.Dial = (&net.Dialer{Resolver: mc.Resolver(), Timeout: 5 * time.Second}).DialContext
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cfg
}

// checkIgnitionEndpoint: the cluster's Ignition endpoint, which names the Service
// ignitiond-endpoints, answers over HTTPS from the leading ignitiond, with a certificate for
// that name from the cluster's CA (guest's, the kubeconfig's), and refuses a request without
// a token.
func checkIgnitionEndpoint(ctx context.Context, t *testing.T, c *client, mc *mgmtcluster.Cluster, cluster string, guest *rest.Config) {
	t.Helper()
	var inf api.Infra
	if code, b := c.do("GET", "/v1/clusters/"+cluster+"/infra", "", &inf); code != http.StatusOK {
		t.Fatalf("GET infra: %d %s", code, b)
	}
	if want := "ignitiond-endpoints." + manifestNamespace + ".svc"; inf.Ignition.Host != want {
		t.Errorf("the Ignition endpoint is %s, want the Service %s", inf.Ignition.Host, want)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(guest.CAData) {
		t.Fatal("the kubeconfig carries no CA")
	}
	dialer := &net.Dialer{Resolver: mc.Resolver(), Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     dialer.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: inf.Ignition.Host, MinVersion: tls.VersionTLS12},
	}}
	url := "https://" + net.JoinHostPort(inf.Ignition.Host, strconv.Itoa(inf.Ignition.Port)) + "/ignition"
	poll(ctx, t, 2*time.Minute, "the Ignition endpoint answers", func(ctx context.Context) (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return false, fmt.Sprintf("GET %s without a token: %d, want 401", url, resp.StatusCode)
		}
		return true, ""
	})
	t.Logf("Ignition endpoint %s answers from the leading ignitiond (401 without a token)", url)
}

// gatewayReplica returns the address of the daemon's replica that the gateway's /healthz
// names as the one it routes to ("ready (10.88.1.4:8081)"); "" and the answer when it names
// none.
func gatewayReplica(t *testing.T, c *client, daemon string) (addr, answer string) {
	t.Helper()
	var health struct {
		Components map[string]string `json:"components"`
	}
	code, b := c.do("GET", "/healthz", "", nil)
	_ = json.Unmarshal(b, &health) // 503 too carries the components
	msg := health.Components[daemon]
	open, end := strings.LastIndex(msg, "("), strings.LastIndex(msg, ")")
	if open < 0 || end < open || !strings.HasPrefix(msg, "ready") {
		return "", fmt.Sprintf("%d %s", code, b)
	}
	return msg[open+1 : end], ""
}

// killPodAt deletes, with grace period 0 (the kubelet stops it at once), the daemon's pod whose
// address is addr ("ip:port").
func killPodAt(ctx context.Context, t *testing.T, cs kubernetes.Interface, daemon, addr string) {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + daemon})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == host {
			if err := cs.CoreV1().Pods(manifestNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed %s (%s, on %s)", p.Name, host, p.Spec.NodeName)
			return
		}
	}
	t.Fatalf("no %s pod at %s", daemon, host)
}

// saveImages writes hostplane's images (docker save) into one archive at path.
func saveImages(ctx context.Context, t *testing.T, tag, path string) string {
	t.Helper()
	args := []string{"save", "-o", path}
	for _, name := range deployImages {
		args = append(args, "hostplane/"+name+":"+tag)
	}
	if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v: %s (build them with `make images`, HOSTPLANE_IMAGE_TAG=%s)", strings.Join(args, " "), err, out, tag)
	}
	return path
}

// applyDevOverlay does what deploy/k8s/README.md tells an operator: prometheus-operator's
// kinds present, the Secrets of `hostplane credentials init` + `k8s-secrets` applied with
// kubectl, and the dev overlay applied server-side, its images at tag (the `images:`
// override an operator sets) and never pulled.
func applyDevOverlay(ctx context.Context, t *testing.T, mc *mgmtcluster.Cluster, tag string) {
	t.Helper()
	admin := mc.APIServer().RESTConfig
	dyn, mapper := prepareForManifests(ctx, t, admin)
	objs := renderManifests(t, "overlays/dev")
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := applyObject(ctx, dyn, mapper, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The credentials, exactly as the README's two commands make them.
	hp := filepath.Join(t.TempDir(), "hostplane")
	build := exec.CommandContext(ctx, "go", "build", "-o", hp, ".")
	build.Dir = filepath.Join("..", "..", "cmd", "hostplane")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build hostplane: %v: %s", err, out)
	}
	creds := filepath.Join(t.TempDir(), "nats-creds")
	run(ctx, t, nil, hp, "credentials", "init", "--dir", creds,
		"--tls-host", "nats", "--tls-host", "nats.hostplane-system.svc", "--tls-host", "nats.hostplane-system.svc.cluster.local",
		"--tls-route-host", "*.nats-headless", "--tls-route-host", "*.nats-headless.hostplane-system.svc",
		"--tls-route-host", "*.nats-headless.hostplane-system.svc.cluster.local",
		"--mgmt-tls-host", "{daemon}.hostplane-system.svc", "--mgmt-tls-host", "{daemon}.hostplane-system.svc.cluster.local")
	secrets := run(ctx, t, nil, hp, "credentials", "k8s-secrets", "--dir", creds)
	run(ctx, t, secrets, "kubectl", "--kubeconfig", mc.KubeconfigPath, "apply", "-f", "-")

	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		retag(t, o, tag)
		if err := applyObject(ctx, dyn, mapper, o, false); err != nil {
			t.Fatal(err)
		}
	}
}

// retag points a workload's hostplane images at tag with imagePullPolicy Never (the nodes
// have them imported; nothing is pulled), and componentd's HOSTPLANE_KARPENTER_IMAGE too.
func retag(t *testing.T, o *unstructured.Unstructured, tag string) {
	t.Helper()
	switch o.GetKind() {
	case "Deployment", "StatefulSet", "Job":
	default:
		return
	}
	// Walked in place: kustomize's maps hold Go ints, which unstructured's deep copies reject.
	spec, _ := o.Object["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	podSpec, _ := template["spec"].(map[string]any)
	containers, ok := podSpec["containers"].([]any)
	if !ok {
		t.Fatalf("%s %s: no containers", o.GetKind(), o.GetName())
	}
	fix := func(image string) string {
		if name, ok := strings.CutPrefix(image, "hostplane/"); ok {
			return "hostplane/" + strings.SplitN(name, ":", 2)[0] + ":" + tag
		}
		return image
	}
	for _, c := range containers {
		m := c.(map[string]any)
		m["image"] = fix(m["image"].(string))
		m["imagePullPolicy"] = string(corev1.PullNever)
		env, _ := m["env"].([]any)
		for _, e := range env {
			em := e.(map[string]any)
			if em["name"] == "HOSTPLANE_KARPENTER_IMAGE" {
				em["value"] = fix(em["value"].(string))
			}
		}
	}
}

// run runs a command with stdin and returns its stdout; a failure fails the test.
func run(ctx context.Context, t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// poll waits for cond, failing the test with the last state it described.
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s within %v: %v; last: %s", what, timeout, err, last)
	}
}

// localCloudMachines lists the machines of cluster the local cloud pod runs, through its API
// at the pod's address (the host routes the pods' ranges).
func localCloudMachines(ctx context.Context, t *testing.T, cs kubernetes.Interface, cluster string) []localcloud.MachineStatus {
	t.Helper()
	pods, err := cs.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=localcloud"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the local cloud's pod: %v, %d pods", err, len(pods.Items))
	}
	// With the token infrad holds (the Secret k8s-secrets made).
	sec, err := cs.CoreV1().Secrets(manifestNamespace).Get(ctx, "localcloud-token", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the local cloud's token: %v", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "localcloud.token")
	if err := os.WriteFile(tokenFile, sec.Data["token"], 0o600); err != nil {
		t.Fatal(err)
	}
	cloud, err := localcloud.NewClient("http://"+net.JoinHostPort(pods.Items[0].Status.PodIP, "8090"), localcloud.WithTokenFile(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cloud.List(ctx, cluster)
	if err != nil {
		t.Fatalf("list the local cloud's machines: %v", err)
	}
	return ms
}

// waitStatefulSet waits for the StatefulSet's replicas all Ready, each on a Bound claim
// (data-<name>-<ordinal>).
func waitStatefulSet(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string, replicas int32) {
	t.Helper()
	poll(ctx, t, 3*time.Minute, "StatefulSet "+name+" Ready", func(ctx context.Context) (bool, string) {
		sts, err := cs.AppsV1().StatefulSets(manifestNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pvcs, err := cs.CoreV1().PersistentVolumeClaims(manifestNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var bound int32
		for _, p := range pvcs.Items {
			if strings.HasPrefix(p.Name, "data-"+name+"-") && p.Status.Phase == corev1.ClaimBound && p.Spec.VolumeName != "" {
				bound++
			}
		}
		state := fmt.Sprintf("%d of %d members Ready, %d claims Bound", sts.Status.ReadyReplicas, replicas, bound)
		return sts.Status.ReadyReplicas == replicas && bound == replicas, state
	})
}

// waitJob waits for the Job to complete.
func waitJob(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	poll(ctx, t, 3*time.Minute, "Job "+name+" Complete", func(ctx context.Context) (bool, string) {
		j, err := cs.BatchV1().Jobs(manifestNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("succeeded %d, failed %d", j.Status.Succeeded, j.Status.Failed)
	})
}

// waitDeploymentAvailable waits for the Deployment's Available condition.
func waitDeploymentAvailable(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	poll(ctx, t, 3*time.Minute, "Deployment "+name+" Available", func(ctx context.Context) (bool, string) {
		d, err := cs.AppsV1().Deployments(manifestNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d of %d replicas ready, %d available", d.Status.ReadyReplicas, d.Status.Replicas, d.Status.AvailableReplicas)
	})
}

// gatewayURL returns the address of a Ready gateway pod.
func gatewayURL(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(manifestNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gateway"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if podReadyAndRunning(&p) {
			return "http://" + net.JoinHostPort(p.Status.PodIP, "8080")
		}
	}
	t.Fatalf("no Ready gateway pod among %d", len(pods.Items))
	return ""
}

// checkControlPlanePods checks that the cluster's control plane runs as Ready pods in its
// namespace: etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
func checkControlPlanePods(ctx context.Context, t *testing.T, cs kubernetes.Interface, cluster string) {
	t.Helper()
	ns := api.ControlPlaneNamespace(cluster)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		if podReadyAndRunning(&p) {
			ready[p.Labels[kuberuntime.LabelComponent]] = true
			t.Logf("pod %s/%s Ready on %s at %s", ns, p.Name, p.Spec.NodeName, p.Status.PodIP)
		}
	}
	for _, comp := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
		if !ready[comp] {
			t.Errorf("no Ready %s pod in %s (Ready: %v)", comp, ns, ready)
		}
	}
}

func podReadyAndRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
