package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad/dockercloud"
)

// dockerMachines lists the containers (running or not) and volumes the docker platform
// holds for cluster.
func dockerMachines(t *testing.T, cluster string) (containers, volumes []string) {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--format", "{{.Names}}", "--filter", "label="+dockercloud.LabelCluster+"="+cluster).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	containers = strings.Fields(string(out))
	out, err = exec.Command("docker", "volume", "ls", "-q", "--filter", "name="+dockercloud.DefaultPrefix+cluster+"-").Output()
	if err != nil {
		t.Fatalf("docker volume ls: %v", err)
	}
	slices.Sort(containers)
	return containers, strings.Fields(string(out))
}

// TestRealNode_DockerPlatformMachinesAreContainersThatJoinRepairAndGo is platform docker end
// to end: a pool's machines are containers of the node image on this host's Docker, started
// by infrad through Cluster API, booting the pool's payload into Ready nodes whose provider
// IDs are their Machines'; a real pod runs on them; hibernation stops every container and a
// wake brings back the same nodes and pod; a machine whose container is killed is replaced
// by autorepair; deleting the cluster leaves no container or volume.
func TestRealNode_DockerPlatformMachinesAreContainersThatJoinRepairAndGo(t *testing.T) {
	rel := release.Latest()
	testenv.RequireBinaries(t, rel, release.Components()...)
	requireNodeImage(t)
	host := dockerBridgeGateway(t)
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.InfraHost, cfg.GuestImagesDir = host, testenv.GuestImagesDir(t) })
	t.Cleanup(func() { s.Stop(context.Background()) })
	cl := "dock-" + randomSuffix()
	t.Cleanup(func() {
		// A failed run's machines go too (a passing run checks they are gone).
		names, vols := dockerMachines(t, cl)
		for _, n := range names {
			_ = exec.Command("docker", "rm", "-f", "-v", n).Run()
		}
		for _, v := range vols {
			_ = exec.Command("docker", "volume", "rm", "-f", v).Run()
		}
	})

	if code, body := c.do("POST", "/v1/clusters", `{"name":"`+cl+`","spec":{"release":{"version":"`+rel.Version+`"},"platform":{"type":"docker"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create cluster: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, available)
	if code, body := c.do("POST", "/v1/clusters/"+cl+"/nodepools", `{"name":"workers","spec":{"replicas":2,
		"release":{"version":"`+rel.Version+`"},"platform":{"type":"docker","local":{"instanceType":"local.small"}},
		"management":{"upgradeType":"Replace","autoRepair":true,"autoRepairPolicy":{"nodeNotReadyTimeout":"20s","nodeStartupTimeout":"5m"}}}}`, nil); code != http.StatusAccepted && code != http.StatusCreated {
		t.Fatalf("create pool: %d %s", code, body)
	}
	c.waitPoolReady(cl, "workers", 2, 5*time.Minute)
	kc := c.kubeClient(cl)
	nodes := readyNodes(t, kc, "workers")
	machines := machineNames(c.poolMachines(cl, "workers"))
	for _, m := range c.poolMachines(cl, "workers") {
		if m.Platform != api.PlatformDocker {
			t.Errorf("machine %s says platform %q, want docker (a real machine, not a simulated one)", m.Name, m.Platform)
		}
	}
	var nodeNames []string
	for _, n := range nodes {
		nodeNames = append(nodeNames, n.Name)
		if n.Spec.ProviderID != api.ProviderID(cl, n.Name) || n.Status.NodeInfo.KubeletVersion != "v"+rel.Version ||
			!strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			t.Errorf("node %s: providerID %q, kubelet %s, runtime %s; want its Machine's ID and a real kubelet on containerd",
				n.Name, n.Spec.ProviderID, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion)
		}
	}
	slices.Sort(nodeNames)
	if !slices.Equal(nodeNames, machines) {
		t.Errorf("Ready nodes %v, want the pool's machines %v", nodeNames, machines)
	}
	containers, _ := dockerMachines(t, cl)
	var want []string
	for _, m := range machines {
		want = append(want, dockercloud.DefaultPrefix+cl+"-"+m)
	}
	if !slices.Equal(containers, want) {
		t.Errorf("docker ps shows %v, want the machines' containers %v", containers, want)
	}
	// The instance type's memory is the container's limit (local.small: 4Gi).
	if out, err := exec.Command("docker", "inspect", "--format", "{{.HostConfig.Memory}}", want[0]).Output(); err != nil || strings.TrimSpace(string(out)) != "4294967296" {
		t.Errorf("memory limit of %s: %q %v, want local.small's 4Gi", want[0], out, err)
	}

	// A real pod on them, pulled from hostplane's registry.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: s.Registry.Ref(dev.EchoRepo, dev.GuestTag)}}},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Minute, func() bool {
		p, err := kc.CoreV1().Pods("default").Get(ctx(t), "echo", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}, "the echo pod never ran on the docker machines")
	if logs, err := c.kubectl(cl, "", "logs", "echo"); err != nil || !strings.Contains(logs, "serving echo on :8080") {
		t.Errorf("kubectl logs: %v: %s", err, logs)
	}

	// Hibernation stops every machine's container; a wake starts the same ones again, and
	// the same nodes come back Ready with the pod running.
	if code, body := c.do("PATCH", "/v1/clusters/"+cl, `{"spec":{"hibernation":{"enabled":true}}}`, nil); code != http.StatusOK {
		t.Fatalf("hibernate: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionHibernated, api.ConditionTrue, hibernateWait)
	testenv.Eventually(t, hibernateWait, func() bool {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+dockercloud.LabelCluster+"="+cl).Output()
		return err == nil && strings.TrimSpace(string(out)) == ""
	}, "hibernated, but containers of %s still run", cl)
	if code, body := c.do("PATCH", "/v1/clusters/"+cl, `{"spec":{"hibernation":{"enabled":false}}}`, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	c.waitCondition(cl, api.ConditionAvailable, api.ConditionTrue, hibernateWait)
	// The Nodes' last status is from before the hibernation: what proves the machines back is
	// their containers running and the pod answering through its kubelet.
	testenv.Eventually(t, hibernateWait, func() bool {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+dockercloud.LabelCluster+"="+cl).Output()
		return err == nil && len(strings.Fields(string(out))) == 2
	}, "the machines' containers were never started again after the wake")
	var answer string
	testenv.Eventually(t, 3*time.Minute, func() bool {
		out, err := c.kubectl(cl, "", "exec", "echo", "--", "/echo", "http://127.0.0.1:8080/")
		answer = out
		return err == nil && strings.TrimSpace(out) == "echo"
	}, "the echo pod never answered again after the wake: %s", lazyString{&answer})
	c.waitPoolReady(cl, "workers", 2, 3*time.Minute)
	if now := machineNames(c.poolMachines(cl, "workers")); !slices.Equal(now, machines) {
		t.Errorf("machines after a wake %v, want the same %v", now, machines)
	}

	// Autorepair: the victim's container is killed (a power cut); its node goes NotReady,
	// the MachineHealthCheck deletes the Machine, its container goes, and a new machine
	// joins in its place.
	victim := machines[0]
	testenv.Eventually(t, time.Minute, func() bool {
		code, body := c.do("POST", "/v1/clusters/"+cl+"/machines/"+victim+"/fault", `{"type":"`+api.FaultCrash+`"}`, nil)
		answer = fmt.Sprintf("%d %s", code, body)
		return code == http.StatusAccepted
	}, "the Crash fault was never injected: %s", lazyString{&answer})
	testenv.Eventually(t, 5*time.Minute, func() bool {
		now := machineNames(c.poolMachines(cl, "workers"))
		return len(now) == 2 && !slices.Contains(now, victim) && len(readyNodes(t, kc, "workers")) == 2
	}, "the killed machine %s was never replaced by a Ready one: machines %v", victim, lazyFunc(func() string {
		return strings.Join(machineNames(c.poolMachines(cl, "workers")), ",")
	}))
	testenv.Eventually(t, time.Minute, func() bool {
		containers, _ := dockerMachines(t, cl)
		return !slices.Contains(containers, dockercloud.DefaultPrefix+cl+"-"+victim)
	}, "the replaced machine's container stayed")

	// Delete: nothing of the cluster's machines is left on the host.
	if code, body := c.do("DELETE", "/v1/clusters/"+cl, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete cluster: %d %s", code, body)
	}
	testenv.Eventually(t, 3*time.Minute, func() bool {
		_, code := c.cluster(cl)
		return code == http.StatusNotFound
	}, "the cluster was never deleted")
	if containers, vols := dockerMachines(t, cl); len(containers)+len(vols) > 0 {
		t.Errorf("after delete the host still has containers %v and volumes %v", containers, vols)
	}
}
