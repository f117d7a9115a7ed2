package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/testenv"
)

const (
	oldRelease = "1.33.13"
	newRelease = "1.34.4"
	available  = 3 * time.Minute
)

// TestCluster_CreateUseUpgradeDelete is the life of a SingleReplica hosted cluster, all
// through the public API and a real client of the hosted cluster.
func TestCluster_CreateUseUpgradeDelete(t *testing.T) {
	s, c := stack(t)

	code, body := c.do("POST", "/v1/clusters", `{"name":"demo","spec":{"release":{"version":"`+oldRelease+`"},"platform":{"type":"local"},"controllerAvailabilityPolicy":"SingleReplica"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	cl := c.waitCondition("demo", api.ConditionAvailable, api.ConditionTrue, available)
	if cl.Status.ControlPlaneEndpoint == nil || cl.Status.ControlPlaneEndpoint.Port == 0 {
		t.Fatalf("no controlPlaneEndpoint in %s", lazyJSON{cl.Status})
	}

	// The kubeconfig works with a plain client: list namespaces, create a ConfigMap.
	kc := c.kubeClient("demo")
	nss, err := kc.CoreV1().Namespaces().List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list namespaces in the hosted cluster: %v", err)
	}
	if len(nss.Items) < 3 {
		t.Fatalf("namespaces = %d, want default, kube-system, kube-public", len(nss.Items))
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives-upgrade"}, Data: map[string]string{"k": "v"}}
	if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	v, err := kc.Discovery().ServerVersion()
	if err != nil || v.GitVersion != "v"+oldRelease {
		t.Fatalf("server version = %v, %v; want v%s", v, err, oldRelease)
	}

	// Upgrade to the next minor.
	code, body = c.do("PATCH", "/v1/clusters/demo", `{"spec":{"release":{"version":"`+newRelease+`"}}}`, nil)
	if code != http.StatusOK {
		t.Fatalf("upgrade: %d %s", code, body)
	}
	testenv.Eventually(t, available, func() bool {
		cl, _ = c.cluster("demo")
		h := cl.Status.Version
		return h != nil && len(h.History) > 0 && h.History[0].Version == newRelease &&
			h.History[0].CompletionTime != nil && cl.Status.Conditions.IsTrue(api.ConditionAvailable)
	}, "upgrade to %s never completed: %s", newRelease, lazyJSON{&cl})
	kc = c.kubeClient("demo")
	v, err = kc.Discovery().ServerVersion()
	if err != nil || v.GitVersion != "v"+newRelease {
		t.Fatalf("after upgrade server version = %v, %v; want v%s", v, err, newRelease)
	}
	got, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), "survives-upgrade", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("configmap after upgrade: %v, %v", got, err)
	}
	var comps api.ComponentList
	if code, body := c.do("GET", "/v1/clusters/demo/components", "", &comps); code != http.StatusOK {
		t.Fatalf("components: %d %s", code, body)
	}
	for _, comp := range comps.Items {
		if comp.Name != api.ComponentEtcd && comp.Status.Version != newRelease {
			t.Errorf("component %s runs %s after the upgrade", comp.Name, comp.Status.Version)
		}
	}

	// Delete: progress shows in Deleting, then 404 and nothing left.
	endpoint := net.JoinHostPort(cl.Status.ControlPlaneEndpoint.Host, strconv.Itoa(cl.Status.ControlPlaneEndpoint.Port))
	if code, body := c.do("DELETE", "/v1/clusters/demo", "", nil); code != http.StatusAccepted {
		t.Fatalf("delete: %d %s", code, body)
	}
	testenv.Eventually(t, available, func() bool {
		_, code := c.cluster("demo")
		return code == http.StatusNotFound
	}, "cluster never went away")
	assertNothingLeft(t, s, c, "demo", endpoint)
}

// deleteCluster deletes cluster name through the API, waits (up to timeout) until it is a 404,
// and checks that nothing of it is left.
func deleteCluster(t *testing.T, s *dev.Stack, c *client, name string, timeout time.Duration) {
	t.Helper()
	got, _ := c.cluster(name)
	endpoint := net.JoinHostPort(got.Status.ControlPlaneEndpoint.Host, strconv.Itoa(got.Status.ControlPlaneEndpoint.Port))
	if code, body := c.do("DELETE", "/v1/clusters/"+name, "", nil); code != http.StatusAccepted {
		t.Fatalf("delete %s: %d %s", name, code, body)
	}
	testenv.Eventually(t, timeout, func() bool {
		_, code := c.cluster(name)
		return code == http.StatusNotFound
	}, "cluster %s never went away", name)
	assertNothingLeft(t, s, c, name, endpoint)
}

// assertNothingLeft checks no process, port, file or KV key of the cluster remains.
func assertNothingLeft(t *testing.T, s *dev.Stack, c *client, name, endpoint string) {
	t.Helper()
	if procs := processesMentioning(c.dataDir, filepath.Join("clusters", name)); len(procs) > 0 {
		t.Errorf("processes of %s still run: %v", name, procs)
	}
	if conn, err := net.DialTimeout("tcp", endpoint, time.Second); err == nil {
		conn.Close()
		t.Errorf("the endpoint %s still accepts connections", endpoint)
	}
	for _, d := range []string{"componentd", "pkid", "infrad", "clusterd"} {
		p := filepath.Join(c.dataDir, d, "clusters", name)
		if _, err := os.Stat(p); err == nil {
			t.Errorf("files of %s left in %s", name, p)
		}
	}
	nc, err := s.ConnectNATS(t.Context(), natsauth.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, b := range []string{bus.BucketClusters, bus.BucketInfra, bus.BucketPKI, bus.BucketControlPlane, bus.BucketNodePools, bus.BucketIgnition} {
		kv, err := js.KeyValue(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		lister, err := kv.ListKeysFiltered(context.Background(), name, name+".>")
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for k := range lister.Keys() {
			t.Errorf("KV %s still holds %s", b, k)
		}
	}
}

// processesMentioning lists pid: cmdline of the live processes of the stack in dataDir
// (testenv.ProcessesUnder) whose command line also contains s.
func processesMentioning(dataDir, s string) []string {
	var out []string
	for _, pid := range testenv.ProcessesUnder(dataDir) {
		cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue // gone since
		}
		line := strings.ReplaceAll(string(cmd), "\x00", " ")
		if strings.Contains(line, s) {
			out = append(out, strconv.Itoa(pid)+": "+line[:min(len(line), 120)])
		}
	}
	return out
}

// TestCluster_BadRequestsNameTheField checks the API refuses bad input with problem+json
// naming what is wrong.
func TestCluster_BadRequestsNameTheField(t *testing.T) {
	_, c := stack(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"bad name", "POST", "/v1/clusters", `{"name":"Not_A_DNS_Label","spec":{"release":{"version":"1.34.4"}}}`, 400, "name"},
		{"unknown release", "POST", "/v1/clusters", `{"name":"x","spec":{"release":{"version":"9.9.9"}}}`, 400, "spec.release.version"},
		{"bad policy", "POST", "/v1/clusters", `{"name":"x","spec":{"release":{"version":"1.34.4"},"controllerAvailabilityPolicy":"Sometimes"}}`, 400, "spec.controllerAvailabilityPolicy"},
		{"unknown platform", "POST", "/v1/clusters", `{"name":"x","spec":{"release":{"version":"1.34.4"},"platform":{"type":"mars"}}}`, 400, "spec.platform.type"},
		{"overlapping cidrs", "POST", "/v1/clusters", `{"name":"x","spec":{"release":{"version":"1.34.4"},"networking":{"serviceCIDR":"10.0.0.0/8","podCIDR":"10.1.0.0/16"}}}`, 400, "spec.networking"},
		{"unknown field", "POST", "/v1/clusters", `{"name":"x","spec":{"release":{"version":"1.34.4"},"colour":"blue"}}`, 400, "spec.colour"},
		{"malformed json", "POST", "/v1/clusters", `{"name":`, 400, ""},
		{"missing cluster", "GET", "/v1/clusters/nope", "", 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := c.do(tc.method, tc.path, tc.body, nil)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			var p struct {
				Detail string           `json:"detail"`
				Errors []api.FieldError `json:"errors"`
			}
			if err := json.Unmarshal(body, &p); err != nil || p.Detail == "" {
				t.Fatalf("not a problem+json answer: %s", body)
			}
			if tc.field == "" {
				return
			}
			for _, f := range p.Errors {
				if strings.HasPrefix(f.Field, tc.field) {
					return
				}
			}
			if !strings.Contains(p.Detail, tc.field) {
				t.Fatalf("the problem does not name %s: %s", tc.field, body)
			}
		})
	}

	// PATCH refusals on an existing cluster (no need for it to be Available).
	if code, body := c.do("POST", "/v1/clusters", `{"name":"patchme","spec":{"release":{"version":"1.34.4"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"downgrade", `{"spec":{"release":{"version":"1.33.13"}}}`, "spec.release.version"},
		{"immutable policy", `{"spec":{"controllerAvailabilityPolicy":"HighlyAvailable"}}`, "spec.controllerAvailabilityPolicy"},
		{"immutable platform", `{"spec":{"platform":{"type":"none"}}}`, "spec.platform.type"},
	} {
		code, body := c.do("PATCH", "/v1/clusters/patchme", tc.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.field) {
			t.Errorf("%s: %d %s; want 400 naming %s", tc.name, code, body, tc.field)
		}
	}
	if code, body := c.do("POST", "/v1/clusters", `{"name":"patchme","spec":{"release":{"version":"1.34.4"}}}`, nil); code != http.StatusConflict {
		t.Errorf("duplicate create: %d %s, want 409", code, body)
	}
}
