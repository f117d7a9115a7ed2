package api_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
)

// FuzzParseVersion: ParseVersion never panics, and what it accepts formats as
// major.minor.patch, which parses back to the same version (with or without the "v").
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{
		"1.34.4", "v1.34.4", " v1.34.4\n", "1.33.7", "0.0.0", "1.2", "1.2.3.4", "01.2.3", "1.34.4-rc.1",
		"1.34.4+build", "vv1.2.3", "", "v", "18446744073709551615.0.0", "18446744073709551616.0.0", "1.-1.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := api.ParseVersion(s)
		// The skew check parses versions from both sides; it must only ever answer.
		_ = api.CheckNodePoolRelease(s, "1.34.4")
		_ = api.CheckNodePoolRelease("1.34.4", s)
		if err != nil {
			return
		}
		formatted := v.String()
		if strings.Count(formatted, ".") != 2 || strings.HasPrefix(formatted, "v") {
			t.Fatalf("ParseVersion(%q) formats as %q, want major.minor.patch", s, formatted)
		}
		for _, again := range []string{formatted, "v" + formatted} {
			w, err := api.ParseVersion(again)
			if err != nil {
				t.Fatalf("ParseVersion(%q) = %q, which does not parse: %v", s, again, err)
			}
			if w.String() != formatted || !w.EqualTo(v) {
				t.Fatalf("ParseVersion(%q) = %q, parsed again = %q", s, formatted, w)
			}
		}
		if err := api.CheckNodePoolRelease(formatted, formatted); err != nil {
			t.Fatalf("a pool at its cluster's own release %q is refused: %v", formatted, err)
		}
	})
}

// FuzzSplitPartKey: a key SplitPartKey accepts is rebuilt by ComponentKey and NodePoolKey, its
// cluster holds no dot (so ClusterPartsFilter of it matches the key), and a key it refuses
// has no non-empty "<cluster>.<part>" form.
func FuzzSplitPartKey(f *testing.F) {
	for _, s := range []string{
		"demo.kube-apiserver", "demo.workers", "demo.etcd", "demo", ".etcd", "demo.", "", ".",
		"demo.a.b", "demo..x", "a.*", "a.>", "demo\x00.x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		cluster, part, ok := api.SplitPartKey(key)
		if !ok {
			if c, p, found := strings.Cut(key, "."); found && c != "" && p != "" {
				t.Fatalf("SplitPartKey(%q) refused a key with cluster %q and part %q", key, c, p)
			}
			return
		}
		if cluster == "" || part == "" || strings.Contains(cluster, ".") {
			t.Fatalf("SplitPartKey(%q) = %q, %q", key, cluster, part)
		}
		if got := api.ComponentKey(cluster, part); got != key {
			t.Fatalf("ComponentKey(SplitPartKey(%q)) = %q", key, got)
		}
		if got := api.NodePoolKey(cluster, part); got != key {
			t.Fatalf("NodePoolKey(SplitPartKey(%q)) = %q", key, got)
		}
		if filter := api.ClusterPartsFilter(cluster); !strings.HasPrefix(key, strings.TrimSuffix(filter, "*")) {
			t.Fatalf("ClusterPartsFilter(%q) = %q does not cover %q", cluster, filter, key)
		}
	})
}

// FuzzValidateNames: the name checks never panic, and every name they accept gives derived
// names (namespace, Secrets, userdata) that are still valid DNS labels, as their limits promise.
func FuzzValidateNames(f *testing.F) {
	for _, s := range []string{
		"demo", "workers", "a", "a-b-c", "Demo", "-demo", "demo-", "de.mo", "", strings.Repeat("a", 40),
		strings.Repeat("a", 41), strings.Repeat("b", api.MaxNodePoolNameLength), strings.Repeat("b", api.MaxNodePoolNameLength+1),
		"ünïcode", "a\x00b",
	} {
		f.Add(s)
	}
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Fuzz(func(t *testing.T, name string) {
		if api.ValidateClusterName(name) == nil {
			for _, derived := range []string{api.ControlPlaneNamespace(name), api.KubeconfigSecretName(name)} {
				if errs := validation.IsDNS1123Label(derived); len(errs) > 0 {
					t.Fatalf("cluster name %q is valid but %q is not a DNS label: %v", name, derived, errs)
				}
			}
			if errs := validation.IsDNS1123Subdomain(api.KubeAPIServerHost(name)); len(errs) > 0 {
				t.Fatalf("cluster name %q is valid but its kube-apiserver host is not a DNS name: %v", name, errs)
			}
		}
		if api.ValidateNodePoolName(name) == nil {
			if errs := validation.IsDNS1123Label(api.UserDataSecretName(name, hash)); len(errs) > 0 {
				t.Fatalf("pool name %q is valid but its userdata Secret name is not a DNS label: %v", name, errs)
			}
		}
	})
}
