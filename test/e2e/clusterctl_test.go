package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// assertClusterctlDescribesItHealthy checks, for a cluster with an Available control plane and
// a Ready pool of n machines, that `clusterctl describe cluster` (the clusterctl of the Cluster
// API release nodepoold runs, built by tools/clusterctl) shows the Cluster Available with its
// LocalCluster Ready and its HostedControlPlane Available, the pool's MachineDeployment with
// every Machine Ready and Available on its Node, and no condition in a state that says
// something is wrong. TestNodePool_JoinRollRelabelRepairInPlaceDrainDelete runs it on its
// first pool (it was a test of its own, which made a cluster and a pool just for this).
func assertClusterctlDescribesItHealthy(t *testing.T, s *dev.Stack, c *client, cl, pool string, n int) {
	t.Helper()
	clusterctl := testenv.Clusterctl(t)
	ns := api.ControlPlaneNamespace(cl)
	args := []string{"describe", "cluster", cl, "-n", ns, "--kubeconfig", s.Management.KubeconfigPath,
		"--show-conditions", "all", "--grouping=false"}
	// Cluster API's status follows the pool's within seconds; what clusterctl shows is checked
	// until it has settled, and the last output is what a failure reports.
	var out string
	var problems []string
	testenv.Eventually(t, 2*time.Minute, func() bool {
		var err error
		if out, err = runClusterctl(t, clusterctl, args...); err != nil {
			problems = []string{err.Error()}
			return false
		}
		problems = describeProblems(parseDescribe(out), cl, pool, n)
		return len(problems) == 0
	}, "clusterctl %s shows:\n%s\nwrong:\n  %s", strings.Join(args, " "), lazyText{&out}, lazyText{&problems})
	t.Logf("clusterctl %s:\n%s", strings.Join(args, " "), out)

	// Each Machine has its NodeRef, and that Node is in the guest cluster.
	dyn, err := dynamic.NewForConfig(s.Management.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	machines, err := dyn.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}).
		Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil || len(machines.Items) != n {
		t.Fatalf("machines of %s: %v, %d; want %d", ns, err, len(machines.Items), n)
	}
	guest := c.kubeClient(cl)
	for _, m := range machines.Items {
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if node == "" {
			t.Errorf("Machine %s has no status.nodeRef", m.GetName())
			continue
		}
		if _, err := guest.CoreV1().Nodes().Get(ctx(t), node, metav1.GetOptions{}); err != nil {
			t.Errorf("Machine %s: its Node %s in the guest: %v", m.GetName(), node, err)
		}
	}
}

// runClusterctl runs clusterctl without colours, the user's configuration or a version check
// against GitHub, and returns its standard output.
func runClusterctl(t *testing.T, clusterctl string, args ...string) (string, error) {
	cx, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cx, clusterctl, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "HOME="+t.TempDir(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("clusterctl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// describedObject is one object row of `clusterctl describe cluster` (v1beta2 output) with the
// condition rows under it (--show-conditions all).
type describedObject struct {
	name                                 string // as shown, e.g. "ClusterInfrastructure - LocalCluster/demo"
	kind                                 string // e.g. "LocalCluster"; "" for a virtual node such as Workers
	replicas, available, ready, upToDate string
	conditions                           []describedCondition
}

type describedCondition struct{ typ, status, reason, message string }

func (o describedObject) condition(typ string) (describedCondition, bool) {
	for _, c := range o.conditions {
		if c.typ == typ {
			return c, true
		}
	}
	return describedCondition{}, false
}

// parseDescribe reads the table clusterctl prints: columns start where their header starts;
// a row's name column holds the tree drawing, then an object ("Kind/name", possibly after a
// role and " - "), a virtual node (no "/"), or a condition type; a row with no name continues
// the message above it.
func parseDescribe(out string) []describedObject {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 {
		return nil
	}
	header := []rune(lines[0])
	var starts []int
	for _, h := range []string{"NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE"} {
		i := strings.Index(string(header), h)
		if i < 0 {
			return nil
		}
		starts = append(starts, len([]rune(string(header)[:i])))
	}
	col := func(r []rune, i int) string {
		if starts[i] >= len(r) {
			return ""
		}
		end := len(r)
		if i+1 < len(starts) && starts[i+1] < end {
			end = starts[i+1]
		}
		return strings.TrimSpace(string(r[starts[i]:end]))
	}
	var objs []describedObject
	for _, l := range lines[1:] {
		r := []rune(l)
		name := strings.TrimLeft(col(r, 0), "│├└─ ")
		switch {
		case name == "":
			if n := len(objs); n > 0 {
				if cs := objs[n-1].conditions; len(cs) > 0 {
					cs[len(cs)-1].message += " " + col(r, 8)
				}
			}
		case strings.Contains(name, "/") || !isConditionType(name) || len(objs) == 0:
			o := describedObject{name: name, replicas: col(r, 1), available: col(r, 2), ready: col(r, 3), upToDate: col(r, 4)}
			if i := strings.LastIndex(name, " "); strings.Contains(name, "/") {
				o.kind = strings.SplitN(name[i+1:], "/", 2)[0]
			}
			objs = append(objs, o)
		default:
			o := &objs[len(objs)-1]
			o.conditions = append(o.conditions, describedCondition{typ: name, status: col(r, 5), reason: col(r, 6), message: col(r, 8)})
		}
	}
	return objs
}

// isConditionType: condition types are one CamelCase word; the Workers virtual node is not one.
func isConditionType(s string) bool { return s != "Workers" && !strings.ContainsAny(s, " /") }

// negativePolarity are the conditions clusterctl shows healthy when False.
var negativePolarity = []string{"Paused", "Deleting", "RollingOut", "ScalingUp", "ScalingDown", "Updating", "Remediating"}

// describeProblems lists what is wrong in the tree of cluster cl with one pool of replicas
// machines: a missing object, a condition a user checks that is not True, any condition in the
// unhealthy state for its polarity (or Unknown), and replica counters that do not add up.
func describeProblems(objs []describedObject, cl, pool string, replicas int) []string {
	var problems []string
	find := func(name string) *describedObject {
		for i := range objs {
			if objs[i].name == name {
				return &objs[i]
			}
		}
		problems = append(problems, "no row "+name)
		return nil
	}
	want := func(o *describedObject, types ...string) {
		if o == nil {
			return
		}
		for _, typ := range types {
			if c, ok := o.condition(typ); !ok {
				problems = append(problems, fmt.Sprintf("%s: no %s condition", o.name, typ))
			} else if c.status != "True" {
				problems = append(problems, fmt.Sprintf("%s: %s is %s (%s: %s), want True", o.name, typ, c.status, c.reason, c.message))
			}
		}
	}
	counters := func(o *describedObject, rep, n string) {
		if o != nil && (o.replicas != rep || o.available != n || o.ready != n || o.upToDate != n) {
			problems = append(problems, fmt.Sprintf("%s: replicas %q available %q ready %q up to date %q, want %s, %s each",
				o.name, o.replicas, o.available, o.ready, o.upToDate, rep, n))
		}
	}

	cluster := find("Cluster/" + cl)
	want(cluster, "Available", "InfrastructureReady", "RemoteConnectionProbe", "ControlPlaneInitialized",
		"ControlPlaneAvailable", "WorkersAvailable", "WorkerMachinesReady", "WorkerMachinesUpToDate")
	// A healthy cluster's summary says nothing more (each True condition's message would be
	// listed in it).
	if cluster != nil {
		if c, ok := cluster.condition("Available"); ok && c.status == "True" && c.message != "" {
			problems = append(problems, fmt.Sprintf("%s: Available says %q while healthy", cluster.name, c.message))
		}
	}
	all := fmt.Sprint(replicas + 1) // the control plane's one kube-apiserver and the workers
	counters(cluster, all+"/"+all, fmt.Sprint(replicas+1))
	want(find("ClusterInfrastructure - LocalCluster/"+cl), "Ready")
	cp := find("ControlPlane - HostedControlPlane/" + cl)
	want(cp, "Available")
	counters(cp, "1/1", "1")
	md := find("MachineDeployment/" + pool)
	want(md, "Available", "MachinesReady", "MachinesUpToDate")
	n := fmt.Sprint(replicas)
	counters(md, n+"/"+n, n)
	find("Workers")
	machines := 0
	for i := range objs {
		if objs[i].kind == "Machine" {
			machines++
			want(&objs[i], "Available", "Ready", "UpToDate", "BootstrapConfigReady", "InfrastructureReady", "NodeHealthy", "NodeReady")
			counters(&objs[i], "1", "1")
		}
	}
	if machines != replicas {
		problems = append(problems, fmt.Sprintf("%d Machine rows, want %d", machines, replicas))
	}
	for _, o := range objs {
		for _, c := range o.conditions {
			healthy := "True"
			if slices.Contains(negativePolarity, c.typ) {
				healthy = "False"
			}
			if c.status != healthy {
				problems = append(problems, fmt.Sprintf("%s: %s is %s (%s: %s), want %s", o.name, c.typ, c.status, c.reason, c.message, healthy))
			}
		}
	}
	return problems
}

// lazyText prints a string or a list of strings when a failure message is built.
type lazyText struct{ v any }

func (l lazyText) String() string {
	switch v := l.v.(type) {
	case *string:
		return *v
	case *[]string:
		return strings.Join(*v, "\n  ")
	}
	return fmt.Sprint(l.v)
}
