package release

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
)

// Setting is one entry of the release catalogue's component tuning: environment variables
// and flags that make a component of a small hosted control plane cheaper to keep running
// without changing what its clients see. Both runtimes apply the settings of the component
// they start (the process runtime to the process, the kubernetes runtime to the container).
type Setting struct {
	// Name is unique in the catalogue, "<component>/<what>"; Selection refers to it.
	Name string
	// Component is the component the setting applies to (one of Components()).
	Component string
	// Policy, when set, limits the setting to clusters of that availability policy
	// (api.SingleReplica or api.HighlyAvailable).
	Policy string
	// Env holds "NAME=value" entries added to the component's environment.
	Env []string
	// Args holds "--flag=value" entries. A flag the component already has takes the
	// setting's value in place; another is appended.
	Args []string
	// Reason says in one line why the setting is safe and what it saves (BENCHMARKS.md has
	// the measured figures).
	Reason string
}

// tuning is the catalogue's table of settings, the same for every release: each flag in it
// exists in every release of the catalogue (kuberuntime's flag test checks them against the
// binaries' --help). Figures: BENCHMARKS.md, "Lean components".
var tuning = []Setting{
	{
		Name: "etcd/gc", Component: Etcd,
		Env:    []string{"GOGC=50"},
		Reason: "a small cluster's etcd holds little live heap: collecting at 1.5× of it instead of 2× keeps about 3 MiB less resident at no measurable CPU",
	},
	{
		Name: "etcd/single-member-election", Component: Etcd, Policy: api.SingleReplica,
		Args:   []string{"--election-timeout=500"},
		Reason: "a lone member hears from no peer, so its election timeout (at least 5 heartbeats) only delays its first election after a start, by up to one timeout",
	},
	{
		Name: "kube-apiserver/gc", Component: KubeAPIServer,
		Env:    []string{"GOGC=50"},
		Reason: "an idle kube-apiserver's resident memory is mostly Go heap waiting for the next collection: collecting at 1.5× of its ~90 MiB live heap keeps ~42 MiB less resident; at 1.25× it was ~20 MiB less again, but every start took 0.19 s longer (more collections while the heap grows)",
	},
}

// Tuning returns the settings of component for a cluster of the given availability policy
// that sel selects, in catalogue order.
func (r Release) Tuning(component, policy string, sel Selection) []Setting {
	var out []Setting
	for _, s := range tuning {
		if s.Component != component || (s.Policy != "" && s.Policy != policyOrDefault(policy)) || !sel.Selects(s.Name) {
			continue
		}
		s.Env, s.Args = slices.Clone(s.Env), slices.Clone(s.Args)
		out = append(out, s)
	}
	return out
}

// policyOrDefault is policy with its default: an empty policy is SingleReplica.
func policyOrDefault(policy string) string {
	if policy == "" {
		return api.SingleReplica
	}
	return policy
}

// TuningNames returns the name of every setting in the catalogue, in catalogue order.
func TuningNames() []string {
	names := make([]string, len(tuning))
	for i, s := range tuning {
		names[i] = s.Name
	}
	return names
}

// Selection chooses which of the catalogue's settings apply. The zero Selection selects
// every setting: the default. Other selections exist to measure a setting's effect (the
// benchmarks compare clusters with and without it) and to turn one off that misbehaves.
type Selection struct {
	none    bool
	only    map[string]bool // when set, only these
	without map[string]bool
}

// ParseSelection parses a selection: "" or "all" selects every setting, "none" none; a
// comma-separated list of names selects only those, and of "-name" entries every setting
// but those. A name ending in "/*" stands for every setting of that component
// ("kube-apiserver/*"). An unknown name is an error.
func ParseSelection(s string) (Selection, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "all":
		return Selection{}, nil
	case "none":
		return Selection{none: true}, nil
	}
	var sel Selection
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, exclude := strings.CutPrefix(item, "-")
		names, err := expand(name)
		if err != nil {
			return Selection{}, err
		}
		set := &sel.only
		if exclude {
			set = &sel.without
		}
		if *set == nil {
			*set = map[string]bool{}
		}
		for _, n := range names {
			(*set)[n] = true
		}
	}
	if sel.only != nil && sel.without != nil {
		return Selection{}, fmt.Errorf("%w: %q mixes names and -names", ErrBadSelection, s)
	}
	return sel, nil
}

// expand returns the settings name stands for: itself, or every setting of a component
// for "<component>/*".
func expand(name string) ([]string, error) {
	if comp, ok := strings.CutSuffix(name, "/*"); ok {
		var names []string
		for _, s := range tuning {
			if s.Component == comp {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: no setting of %q (known: %s)", ErrBadSelection, comp, strings.Join(TuningNames(), ", "))
		}
		return names, nil
	}
	if !slices.Contains(TuningNames(), name) {
		return nil, fmt.Errorf("%w: unknown setting %q (known: %s)", ErrBadSelection, name, strings.Join(TuningNames(), ", "))
	}
	return []string{name}, nil
}

// Selects reports whether the selection applies the setting called name.
func (sel Selection) Selects(name string) bool {
	switch {
	case sel.none:
		return false
	case sel.only != nil:
		return sel.only[name]
	default:
		return !sel.without[name]
	}
}

// String returns the selection in ParseSelection's syntax.
func (sel Selection) String() string {
	switch {
	case sel.none:
		return "none"
	case sel.only != nil:
		return strings.Join(sortedKeys(sel.only, ""), ",")
	case sel.without != nil:
		return strings.Join(sortedKeys(sel.without, "-"), ",")
	}
	return "all"
}

func sortedKeys(m map[string]bool, prefix string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, prefix+k)
	}
	slices.Sort(out)
	return out
}

// ApplyArgs returns args with the settings' flags: a flag args already has ("--name=…")
// takes the setting's value in place, another is appended, in the settings' order.
func ApplyArgs(args []string, settings []Setting) []string {
	out := slices.Clone(args)
	for _, s := range settings {
		for _, a := range s.Args {
			name, _, _ := strings.Cut(a, "=")
			i := slices.IndexFunc(out, func(o string) bool {
				n, _, _ := strings.Cut(o, "=")
				return n == name
			})
			if i >= 0 {
				out[i] = a
			} else {
				out = append(out, a)
			}
		}
	}
	return out
}

// Env returns the settings' environment entries, in the settings' order.
func Env(settings []Setting) []string {
	var out []string
	for _, s := range settings {
		out = append(out, s.Env...)
	}
	return out
}
