package component

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// HashEnv is the environment variable that carries a replica's config hash. It is part of
// the process.Spec, so a new config hash is a new process.Spec.Hash: the supervisor replaces
// the process even when only the content of its files changed.
const HashEnv = "HOSTPLANE_CONFIG_HASH"

// Inputs is everything the components of one cluster are configured from.
type Inputs struct {
	Cluster string
	// Version is the cluster's release version (api.Release.Version).
	Version string
	// Policy is api.SingleReplica or api.HighlyAvailable.
	Policy     string
	Infra      api.Infra
	Networking api.Networking // defaults filled by the caller or NewInputs
	// Dir is the cluster's directory (absolute); the paths in Files are relative to it.
	Dir string
	// Files is the content of every file the components read: those written from the PKI
	// (see Files) and kube-apiserver's audit policy (FileAuditPolicy, from Audit).
	Files map[string][]byte
	// Audit is the cluster's audit configuration (api.ClusterSpec.EffectiveAudit).
	Audit api.Audit
	// PKISerial is the serial of the PKI record Files come from. It is recorded in the
	// components' status (api.ControlPlaneComponentStatus.PKISerial), not hashed: the
	// content of the files is.
	PKISerial string
	// AdminCert and AdminKey authenticate kube-apiserver's readiness probe; without them
	// the probe is anonymous.
	AdminCert, AdminKey []byte
	// Autoscaler configures the karpenter component.
	Autoscaler Autoscaler
	// Tuning selects which of the release catalogue's component settings apply (the zero
	// value: all of them). Each selected setting's flags and environment join the
	// component's own, so they are part of its config hash.
	Tuning release.Selection
}

// path returns the absolute path of a file relative to the cluster's directory.
func (in *Inputs) path(rel string) string { return filepath.Join(in.Dir, filepath.FromSlash(rel)) }

func (in *Inputs) serviceCIDR() string {
	if in.Networking.ServiceCIDR != "" {
		return in.Networking.ServiceCIDR
	}
	return api.DefaultServiceCIDR
}

func (in *Inputs) podCIDR() string {
	if in.Networking.PodCIDR != "" {
		return in.Networking.PodCIDR
	}
	return api.DefaultPodCIDR
}

func (in *Inputs) ha() bool { return in.Policy == api.HighlyAvailable }

// Component declares one control-plane component.
type Component struct {
	Name      string
	DependsOn []string
	// StartAfter, when set, replaces DependsOn as the components that must be Available
	// before a replica that runs nothing starts: a component that waits for its
	// dependencies by itself starts beside them instead of after them. DependsOn still
	// orders rollouts (a running replica is replaced only once its dependencies have
	// rolled out) and teardown.
	StartAfter []string
	// ReleaseBound components run the release's own binary, so the release version is an
	// input of their config hash. etcd is not: one etcd build serves every release.
	ReleaseBound bool
	// Uses lists the files (relative paths, see Files) the component reads; their content
	// is an input of its config hash.
	Uses []string
	// MayUse lists files the component reads when they exist (see Files); the content of
	// those that exist is an input of its config hash.
	MayUse []string
	// LoadBalanced components serve clients through infrad's load balancer when they run
	// several replicas: a replica is drained from it before it is stopped.
	LoadBalanced bool

	single, ha int // replicas per availability policy
	// StopTimeout is how long a replica gets after SIGTERM.
	StopTimeout time.Duration
	args        func(in *Inputs, n int) ([]string, error)
	probe       func(in *Inputs, n int) (process.Probe, error)
	// Optional parts: enabled (nil: always) says whether the component runs at all, binary
	// (nil: the release's binary of its name) where its executable is, env (nil: none) the
	// environment of a replica, which is hashed like its arguments.
	enabled func(in *Inputs) bool
	binary  func(in *Inputs) (string, error)
	env     func(in *Inputs, n int) ([]string, error)
}

// StartsAfter returns the components that must be Available before the component's
// replicas start: StartAfter, or DependsOn when that is unset.
func (c *Component) StartsAfter() []string {
	if c.StartAfter != nil {
		return c.StartAfter
	}
	return c.DependsOn
}

// Replicas returns how many replicas the component runs under policy.
func (c *Component) Replicas(policy string) int {
	if policy == api.HighlyAvailable {
		return c.ha
	}
	return c.single
}

// ProcessName names replica n of component in cluster: "<cluster>-<component>-<n>".
func ProcessName(cluster, component string, n int) string {
	return fmt.Sprintf("%s-%s-%d", cluster, component, n)
}

// Desired is what a component should run for some Inputs.
type Desired struct {
	Component *Component
	Version   string
	Replicas  int
	Hash      string
	// Specs has one process.Spec per replica, index = replica number.
	Specs []process.Spec
}

// hashInputs is exactly what a component's config hash is computed from.
type hashInputs struct {
	Component string            `json:"component"`
	Version   string            `json:"version,omitempty"` // only for ReleaseBound components
	Replicas  int               `json:"replicas"`
	Files     map[string]string `json:"files"` // path → sha256 of the content
	// Args of every replica: the ports of the infra allocation, the networking CIDRs, the
	// replica layout and the file paths all appear there.
	Args [][]string `json:"args"`
	// Env of every replica, for components configured through their environment.
	Env [][]string `json:"env,omitempty"`
}

// Desired computes the component's config hash and every replica's process.Spec. It fails
// when the release's binary is missing or the inputs lack a file or a port.
func (c *Component) Desired(in *Inputs) (Desired, error) {
	rel, err := release.Lookup(in.Version)
	if err != nil {
		return Desired{}, err
	}
	n := c.Replicas(in.Policy)
	if c.enabled != nil && !c.enabled(in) {
		// Nothing runs: nothing else is needed either.
		hi := hashInputs{Component: c.Name, Files: map[string]string{}}
		b, err := json.Marshal(hi)
		if err != nil {
			return Desired{}, err
		}
		sum := sha256.Sum256(b)
		return Desired{Component: c, Version: rel.Version, Hash: hex.EncodeToString(sum[:8])}, nil
	}
	var bin string
	if c.binary != nil {
		bin, err = c.binary(in)
	} else {
		bin, err = rel.Binary(c.Name)
	}
	if err != nil {
		return Desired{}, err
	}
	hi := hashInputs{Component: c.Name, Replicas: n, Files: make(map[string]string, len(c.Uses))}
	if c.ReleaseBound {
		hi.Version = rel.Version
	}
	for _, f := range c.Uses {
		content, ok := in.Files[f]
		if !ok {
			return Desired{}, fmt.Errorf("%w: %s needs %s", ErrIncompletePKI, c.Name, f)
		}
		sum := sha256.Sum256(content)
		hi.Files[f] = hex.EncodeToString(sum[:])
	}
	for _, f := range c.MayUse {
		if content, ok := in.Files[f]; ok {
			sum := sha256.Sum256(content)
			hi.Files[f] = hex.EncodeToString(sum[:])
		}
	}
	tuning := rel.Tuning(c.Name, in.Policy, in.Tuning)
	for i := range n {
		args, err := c.args(in, i)
		if err != nil {
			return Desired{}, err
		}
		hi.Args = append(hi.Args, release.ApplyArgs(args, tuning))
		var env []string
		if c.env != nil {
			if env, err = c.env(in, i); err != nil {
				return Desired{}, err
			}
		}
		if env = append(env, release.Env(tuning)...); len(env) > 0 {
			hi.Env = append(hi.Env, env)
		}
	}
	b, err := json.Marshal(hi) // maps marshal with sorted keys: deterministic
	if err != nil {
		return Desired{}, err
	}
	sum := sha256.Sum256(b)
	d := Desired{Component: c, Version: rel.Version, Replicas: n, Hash: hex.EncodeToString(sum[:8])}
	for i := range n {
		probe, err := c.probe(in, i)
		if err != nil {
			return Desired{}, err
		}
		env := []string{HashEnv + "=" + d.Hash}
		if hi.Env != nil {
			env = append(env, hi.Env[i]...)
		}
		d.Specs = append(d.Specs, process.Spec{
			Name:           ProcessName(in.Cluster, c.Name, i),
			Path:           bin,
			Args:           slices.Clone(hi.Args[i]),
			Env:            env,
			Dir:            in.Dir,
			LogFile:        in.path(LogFile(c.Name, i)),
			Probe:          probe,
			StopTimeout:    c.StopTimeout,
			InitialBackoff: 500 * time.Millisecond,
			MaxBackoff:     30 * time.Second,
		})
	}
	return d, nil
}

// HashOf returns the config hash a process.Spec was built with ("" when none).
func HashOf(spec process.Spec) string {
	for _, e := range spec.Env {
		if v, ok := strings.CutPrefix(e, HashEnv+"="); ok {
			return v
		}
	}
	return ""
}

// Quorum is how many ready replicas make the component Available: a majority of etcd
// members, one replica of anything else.
func (c *Component) Quorum(replicas int) int {
	if c.Name == api.ComponentEtcd {
		return replicas/2 + 1
	}
	return min(1, replicas)
}

var all = []*Component{etcd(), kubeAPIServer(), kubeControllerManager(), kubeScheduler(), karpenter()}

// All returns every component in dependency order: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, karpenter. A component comes after all its
// dependencies.
func All() []*Component { return slices.Clone(all) }

// Names returns the names of All().
func Names() []string {
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.Name
	}
	return names
}

// Lookup returns the component called name.
func Lookup(name string) (*Component, error) {
	for _, c := range all {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownComponent, name)
}

// MaxReplicas is the most replicas any component runs under any policy.
func MaxReplicas() int {
	m := 0
	for _, c := range all {
		m = max(m, c.single, c.ha)
	}
	return m
}
