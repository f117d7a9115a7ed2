package release

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestTuning_EverySettingNamesItsComponentAndSaysWhy(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range tuning {
		if seen[s.Name] {
			t.Errorf("setting %s appears twice", s.Name)
		}
		seen[s.Name] = true
		if !slices.Contains(Components(), s.Component) || !strings.HasPrefix(s.Name, s.Component+"/") {
			t.Errorf("setting %s: component %q is not its name's prefix or not a component", s.Name, s.Component)
		}
		if strings.TrimSpace(s.Reason) == "" || strings.Contains(s.Reason, "\n") {
			t.Errorf("setting %s: want a one-line reason, have %q", s.Name, s.Reason)
		}
		if len(s.Env)+len(s.Args) == 0 {
			t.Errorf("setting %s sets nothing", s.Name)
		}
		for _, e := range s.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				t.Errorf("setting %s: environment entry %q is not NAME=value", s.Name, e)
			}
		}
		for _, a := range s.Args {
			if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
				t.Errorf("setting %s: argument %q is not --flag=value", s.Name, a)
			}
		}
		if s.Policy != "" && s.Policy != api.SingleReplica && s.Policy != api.HighlyAvailable {
			t.Errorf("setting %s: unknown policy %q", s.Name, s.Policy)
		}
	}
}

func TestTuning_FollowsThePolicyAndTheSelection(t *testing.T) {
	saved := tuning
	t.Cleanup(func() { tuning = saved })
	tuning = []Setting{
		{Name: "etcd/a", Component: Etcd, Env: []string{"A=1"}, Reason: "r"},
		{Name: "etcd/single", Component: Etcd, Policy: api.SingleReplica, Args: []string{"--s=1"}, Reason: "r"},
		{Name: "etcd/ha", Component: Etcd, Policy: api.HighlyAvailable, Args: []string{"--h=1"}, Reason: "r"},
		{Name: "kube-apiserver/b", Component: KubeAPIServer, Env: []string{"B=1"}, Reason: "r"},
	}
	r := Latest()
	names := func(ss []Setting) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	sel := func(s string) Selection {
		t.Helper()
		v, err := ParseSelection(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		component, policy, selection, want string
	}{
		{Etcd, api.SingleReplica, "", "etcd/a,etcd/single"},
		{Etcd, "", "all", "etcd/a,etcd/single"}, // no policy is SingleReplica
		{Etcd, api.HighlyAvailable, "", "etcd/a,etcd/ha"},
		{Etcd, api.SingleReplica, "none", ""},
		{Etcd, api.SingleReplica, "-etcd/a", "etcd/single"},
		{Etcd, api.SingleReplica, "etcd/a,kube-apiserver/b", "etcd/a"},
		{Etcd, api.HighlyAvailable, "etcd/*", "etcd/a,etcd/ha"},
		{Etcd, api.SingleReplica, "-etcd/*", ""},
		{KubeAPIServer, api.SingleReplica, "-etcd/*", "kube-apiserver/b"},
		{KubeScheduler, api.SingleReplica, "", ""},
	}
	for _, tt := range tests {
		if got := names(r.Tuning(tt.component, tt.policy, sel(tt.selection))); got != tt.want {
			t.Errorf("Tuning(%s, %s, %q) = %q, want %q", tt.component, tt.policy, tt.selection, got, tt.want)
		}
	}
	for _, bad := range []string{"etcd/nope", "nope/*", "etcd/a,-etcd/single"} {
		if _, err := ParseSelection(bad); !errors.Is(err, ErrBadSelection) {
			t.Errorf("ParseSelection(%q) = %v, want ErrBadSelection", bad, err)
		}
	}
	if got := sel("-etcd/single,-etcd/a").String(); got != "-etcd/a,-etcd/single" {
		t.Errorf("String() = %q", got)
	}
}

func TestApplyArgs_ReplacesAFlagInPlaceAndAppendsTheRest(t *testing.T) {
	args := []string{"--a=1", "--controllers=*", "--b=2"}
	got := ApplyArgs(args, []Setting{
		{Args: []string{"--controllers=*,-x"}},
		{Args: []string{"--c=3"}},
	})
	want := []string{"--a=1", "--controllers=*,-x", "--b=2", "--c=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("ApplyArgs = %v, want %v", got, want)
	}
	if args[1] != "--controllers=*" {
		t.Fatalf("ApplyArgs changed its input: %v", args)
	}
	if got := Env([]Setting{{Env: []string{"A=1"}}, {Env: []string{"B=2", "C=3"}}}); !slices.Equal(got, []string{"A=1", "B=2", "C=3"}) {
		t.Fatalf("Env = %v", got)
	}
}
