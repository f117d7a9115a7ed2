package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

// clearEnv unsets every variable readSettings reads (t.Setenv restores them, and the
// KUBECONFIG readSettings sets, afterwards).
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"KUBECONFIG", "HOSTPLANE_MANAGEMENT_KUBECONFIG", "HOSTPLANE_NAMESPACE", "HOSTPLANE_CLUSTER",
		"HOSTPLANE_SCALE_DOWN", "HOSTPLANE_UNNEEDED_TIME", "HOSTPLANE_MAX_NODES_TOTAL", "HOSTPLANE_MAX_POD_GRACE_PERIOD",
		"HOSTPLANE_MAX_NODE_PROVISION_TIME"} {
		t.Setenv(k, "")
	}
}

func TestReadSettings_WithoutAManagementKubeconfig_MeansInCluster(t *testing.T) {
	clearEnv(t)
	s, err := readSettings([]string{"--kubeconfig=/etc/hostplane/karpenter-kubeconfig/kubeconfig",
		"--namespace=hostplane-c1", "--cluster=c1", "--scale-down=false", "--unneeded-time=90s"})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	if !s.inCluster() {
		t.Errorf("settings %+v: want in-cluster without --management-kubeconfig", s)
	}
	if s.namespace != "hostplane-c1" || s.cluster != "c1" || s.options.ScaleDown || s.options.UnneededTime != 90*time.Second {
		t.Errorf("settings %+v", s)
	}

	// Outside a pod there is no in-cluster config: the error says what to set.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := s.managementConfig(); err == nil || !strings.Contains(err.Error(), "--management-kubeconfig") ||
		!strings.Contains(err.Error(), "in-cluster") {
		t.Errorf("managementConfig outside a pod = %v, want an error naming --management-kubeconfig and in-cluster config", err)
	}
}

func TestReadSettings_AManagementKubeconfigFromTheFlagOrTheEnvironment_IsUsed(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string
	}{
		"flag":        {args: []string{"--management-kubeconfig=/m/kubeconfig"}},
		"environment": {env: "/m/kubeconfig"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("HOSTPLANE_MANAGEMENT_KUBECONFIG", tc.env)
			s, err := readSettings(append(tc.args, "--kubeconfig=/g", "--namespace=hostplane-c1", "--cluster=c1"))
			if err != nil {
				t.Fatalf("readSettings: %v", err)
			}
			if s.inCluster() || s.managementKubeconfig != "/m/kubeconfig" {
				t.Errorf("settings %+v: want the management kubeconfig /m/kubeconfig", s)
			}
			if _, err := s.managementConfig(); err == nil || !strings.Contains(err.Error(), "/m/kubeconfig") {
				t.Errorf("managementConfig with a missing file = %v, want an error naming it", err)
			}
		})
	}
}

func TestReadSettings_RequiresTheGuestNamespaceAndCluster(t *testing.T) {
	for _, missing := range []string{"--kubeconfig", "--namespace", "--cluster"} {
		t.Run(missing, func(t *testing.T) {
			clearEnv(t)
			var args []string
			for _, a := range []string{"--kubeconfig=/g", "--namespace=hostplane-c1", "--cluster=c1"} {
				if !strings.HasPrefix(a, missing+"=") {
					args = append(args, a)
				}
			}
			if _, err := readSettings(args); err == nil || !strings.Contains(err.Error(), missing) {
				t.Errorf("readSettings without %s = %v, want an error naming it", missing, err)
			}
		})
	}
}

// The version the API names when it refuses autoprovisioning is the one this module builds.
func TestKarpenterVersion_IsTheOneThisModuleRequires(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "sigs.k8s.io/karpenter " + api.KarpenterVersion + "\n"; !strings.Contains(string(mod), want) {
		t.Errorf("go.mod does not require %q (api.KarpenterVersion)", strings.TrimSpace(want))
	}
}

func TestReadSettings_TheClusterBounds(t *testing.T) {
	clearEnv(t)
	base := []string{"--kubeconfig=/g", "--namespace=hostplane-c1", "--cluster=c1"}
	s, err := readSettings(append(base, "--max-nodes-total=7", "--max-pod-grace-period=45s", "--max-node-provision-time=3m"))
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	if s.maxNodesTotal != 7 || s.options.MaxPodGracePeriod != 45*time.Second || s.provisionTime != 3*time.Minute {
		t.Errorf("settings %+v", s)
	}
	for _, bad := range []string{"--max-nodes-total=-1", "--max-nodes-total=many", "--max-pod-grace-period=soon", "--max-node-provision-time=-1m"} {
		clearEnv(t)
		if _, err := readSettings(append(base, bad)); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("readSettings(%s) = %v, want an error naming the flag", bad, err)
		}
	}
}
