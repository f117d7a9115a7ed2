package component

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// inputs returns Inputs with fake file contents (the specs never parse them) and the ports
// of the policy's topology.
func inputs(t *testing.T, version, policy string) *Inputs {
	t.Helper()
	rel, err := release.Lookup(version)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireBinaries(t, rel, release.Components()...)
	n := 1
	if policy == api.HighlyAvailable {
		n = 3
	}
	inf := api.Infra{Endpoint: api.Endpoint{Host: "127.0.0.1", Port: 6443}, Ready: true, AutoscalerPorts: []int{10300, 10301}}
	for i := range n {
		inf.Etcd = append(inf.Etcd, api.EtcdMember{Name: "etcd-" + string(rune('a'+i)), Host: "127.0.0.1", ClientPort: 2379 + 10*i, PeerPort: 2380 + 10*i})
		if i < 2 && (policy == api.HighlyAvailable || i == 0) {
			inf.APIServers = append(inf.APIServers, api.Endpoint{Host: "127.0.0.1", Port: 7443 + i})
			inf.ControllerManagerPorts = append(inf.ControllerManagerPorts, 10257+i*10)
			inf.SchedulerPorts = append(inf.SchedulerPorts, 10259+i*10)
		}
	}
	files := map[string][]byte{}
	for _, c := range All() {
		for _, f := range c.Uses {
			switch {
			case strings.HasSuffix(f, "-ca.crt"):
				files[f] = testCA.CertPEM()
			case strings.HasSuffix(f, ".crt"):
				files[f] = testLeaf.CertPEM()
			default:
				files[f] = testLeafKey
			}
		}
	}
	// The probes' client certificates.
	files[CertFile(api.CertAPIServerEtcdClient)], files[KeyFile(api.CertAPIServerEtcdClient)] = testLeaf.CertPEM(), testLeafKey
	return &Inputs{Cluster: "demo", Version: version, Policy: policy, Infra: inf, Dir: "/data/componentd/clusters/demo", Files: files,
		Autoscaler: Autoscaler{Enabled: true, Binary: "/usr/local/bin/hostplane-karpenter", ManagementKubeconfig: "/data/management.kubeconfig",
			Namespace: "hostplane-demo", Options: (&api.ClusterSpec{}).EffectiveAutoscaling()}}
}

var testCA, testLeaf, testLeafKey = func() (*certs.KeyPair, *certs.KeyPair, []byte) {
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		panic(err)
	}
	leaf, err := ca.Issue(certs.Request{CommonName: "leaf", Usage: certs.UsageClient, Lifetime: time.Hour})
	if err != nil {
		panic(err)
	}
	key, err := leaf.KeyPEM()
	if err != nil {
		panic(err)
	}
	return ca, leaf, key
}()

func desired(t *testing.T, c *Component, in *Inputs) Desired {
	t.Helper()
	d, err := c.Desired(in)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return d
}

func TestAll_IsInDependencyOrder(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range All() {
		for _, dep := range c.DependsOn {
			if !seen[dep] {
				t.Errorf("%s comes before its dependency %s", c.Name, dep)
			}
		}
		seen[c.Name] = true
	}
	want := []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}
	if !slices.Equal(Names(), want) {
		t.Errorf("Names() = %v, want %v", Names(), want)
	}
}

func TestReplicas_PerAvailabilityPolicy(t *testing.T) {
	want := map[string][2]int{
		api.ComponentEtcd: {1, 3}, api.ComponentKubeAPIServer: {1, 2},
		api.ComponentControllerManager: {1, 2}, api.ComponentScheduler: {1, 2}, api.ComponentKarpenter: {1, 1},
	}
	for _, c := range All() {
		got := [2]int{c.Replicas(api.SingleReplica), c.Replicas(api.HighlyAvailable)}
		if got != want[c.Name] {
			t.Errorf("%s replicas = %v, want %v", c.Name, got, want[c.Name])
		}
	}
	if e, _ := Lookup(api.ComponentEtcd); e.Quorum(3) != 2 || e.Quorum(1) != 1 {
		t.Errorf("etcd quorum of 3 = %d, of 1 = %d", e.Quorum(3), e.Quorum(1))
	}
	if k, _ := Lookup(api.ComponentKubeAPIServer); k.Quorum(2) != 1 {
		t.Errorf("kube-apiserver quorum of 2 = %d, want 1", k.Quorum(2))
	}
}

func TestDesired_IsDeterministic(t *testing.T) {
	for _, c := range All() {
		a, b := desired(t, c, inputs(t, "1.34.4", api.HighlyAvailable)), desired(t, c, inputs(t, "1.34.4", api.HighlyAvailable))
		if a.Hash != b.Hash || len(a.Specs) != len(b.Specs) {
			t.Fatalf("%s: hashes %s and %s differ", c.Name, a.Hash, b.Hash)
		}
		for i := range a.Specs {
			if a.Specs[i].Hash() != b.Specs[i].Hash() || a.Specs[i].LogFile != b.Specs[i].LogFile {
				t.Errorf("%s replica %d: process specs differ between two computations", c.Name, i)
			}
		}
	}
}

func TestDesired_ReleaseChangesEveryReleaseBoundComponent(t *testing.T) {
	for _, c := range All() {
		old, upgraded := desired(t, c, inputs(t, "1.33.13", api.SingleReplica)), desired(t, c, inputs(t, "1.34.4", api.SingleReplica))
		changed := old.Hash != upgraded.Hash
		if changed != c.ReleaseBound {
			t.Errorf("%s: hash changed on upgrade = %v", c.Name, changed)
		}
		if !changed && old.Specs[0].Hash() != upgraded.Specs[0].Hash() {
			t.Errorf("%s: process spec changed on upgrade though its config did not", c.Name)
		}
	}
}

func TestDesired_FileContentChangesOnlyTheComponentsThatReadIt(t *testing.T) {
	base := inputs(t, "1.34.4", api.SingleReplica)
	rotated := inputs(t, "1.34.4", api.SingleReplica)
	rotated.Files[KubeconfigFile(api.KubeconfigScheduler)] = []byte("renewed")
	for _, c := range All() {
		changed := desired(t, c, base).Hash != desired(t, c, rotated).Hash
		if changed != (c.Name == api.ComponentScheduler) {
			t.Errorf("%s: hash changed = %v after the scheduler kubeconfig was renewed", c.Name, changed)
		}
	}
	rotated = inputs(t, "1.34.4", api.SingleReplica)
	otherCA, err := certs.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rotated.Files[CertFile(api.CertEtcdCA)] = otherCA.CertPEM()
	for _, c := range All() {
		changed := desired(t, c, base).Hash != desired(t, c, rotated).Hash
		want := c.Name == api.ComponentEtcd || c.Name == api.ComponentKubeAPIServer
		if changed != want {
			t.Errorf("%s: hash changed = %v after the etcd CA changed, want %v", c.Name, changed, want)
		}
	}
}

func TestDesired_PortsAndNetworkingAreHashInputs(t *testing.T) {
	base := inputs(t, "1.34.4", api.SingleReplica)
	moved := inputs(t, "1.34.4", api.SingleReplica)
	moved.Infra.Etcd[0].ClientPort++
	moved.Networking.ServiceCIDR = "10.100.0.0/16"
	for _, c := range []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager} {
		comp, _ := Lookup(c)
		if desired(t, comp, base).Hash == desired(t, comp, moved).Hash {
			t.Errorf("%s: hash unchanged after ports and service CIDR changed", c)
		}
	}
}

func TestDesired_HighlyAvailableEtcdFormsOneCluster(t *testing.T) {
	in := inputs(t, "1.34.4", api.HighlyAvailable)
	etcd, _ := Lookup(api.ComponentEtcd)
	d := desired(t, etcd, in)
	if len(d.Specs) != 3 {
		t.Fatalf("%d etcd specs, want 3", len(d.Specs))
	}
	initial := ""
	for i, s := range d.Specs {
		if s.Name != ProcessName("demo", "etcd", i) {
			t.Errorf("replica %d named %q", i, s.Name)
		}
		ic := flag(s.Args, "--initial-cluster")
		if initial == "" {
			initial = ic
		}
		if ic != initial || strings.Count(ic, "https://") != 3 {
			t.Errorf("replica %d --initial-cluster=%s", i, ic)
		}
		if HashOf(s) != d.Hash {
			t.Errorf("replica %d carries hash %q, want %q", i, HashOf(s), d.Hash)
		}
	}
	kas, _ := Lookup(api.ComponentKubeAPIServer)
	k := desired(t, kas, in)
	if got := flag(k.Specs[1].Args, "--etcd-servers"); strings.Count(got, "https://") != 3 {
		t.Errorf("kube-apiserver --etcd-servers=%s, want all three members", got)
	}
	kcm, _ := Lookup(api.ComponentControllerManager)
	if got := flag(desired(t, kcm, in).Specs[0].Args, "--leader-elect"); got != "true" {
		t.Errorf("HA kube-controller-manager --leader-elect=%s", got)
	}
	if got := flag(desired(t, kcm, inputs(t, "1.34.4", api.SingleReplica)).Specs[0].Args, "--leader-elect"); got != "false" {
		t.Errorf("single kube-controller-manager --leader-elect=%s", got)
	}
}

func TestDesired_MissingInputsAreErrors(t *testing.T) {
	in := inputs(t, "1.34.4", api.HighlyAvailable)
	in.Infra.APIServers = in.Infra.APIServers[:1]
	kas, _ := Lookup(api.ComponentKubeAPIServer)
	if _, err := kas.Desired(in); err == nil {
		t.Error("kube-apiserver with one port for two replicas: no error")
	}
	in = inputs(t, "1.34.4", api.SingleReplica)
	delete(in.Files, FileSAPrivate)
	if _, err := kas.Desired(in); err == nil {
		t.Error("kube-apiserver without the service-account key: no error")
	}
}

func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// withAudit returns inputs whose audit configuration is a, its policy file written as the
// process runtime does.
func withAudit(t *testing.T, in *Inputs, a api.Audit) *Inputs {
	t.Helper()
	policy, err := AuditPolicyFile(a)
	if err != nil {
		t.Fatal(err)
	}
	in.Audit, in.Files[FileAuditPolicy] = a, policy
	return in
}

func TestDesired_AuditSettingsRollOnlyKubeAPIServer(t *testing.T) {
	base := withAudit(t, inputs(t, "1.34.4", api.SingleReplica), api.Audit{})
	for _, tt := range []struct {
		name string
		a    api.Audit
	}{
		{"profile None", api.Audit{Profile: api.AuditNone}},
		{"profile WriteRequestBodies", api.Audit{Profile: api.AuditWriteRequestBodies}},
		{"more backups", api.Audit{MaxBackups: 9}},
		{"larger files", api.Audit{MaxSizeMB: 500}},
	} {
		changed := withAudit(t, inputs(t, "1.34.4", api.SingleReplica), tt.a)
		for _, c := range All() {
			rolled := desired(t, c, base).Hash != desired(t, c, changed).Hash
			if rolled != (c.Name == api.ComponentKubeAPIServer) {
				t.Errorf("%s: %s changed its hash = %v", tt.name, c.Name, rolled)
			}
		}
	}
	// The defaults written out are the same configuration as none given.
	explicit := withAudit(t, inputs(t, "1.34.4", api.SingleReplica), api.DefaultAudit())
	kas, _ := Lookup(api.ComponentKubeAPIServer)
	if desired(t, kas, base).Hash != desired(t, kas, explicit).Hash {
		t.Error("the explicit default audit configuration rolls kube-apiserver")
	}
}

func TestDesired_EachKubeAPIServerReplicaWritesItsOwnAuditLog(t *testing.T) {
	in := withAudit(t, inputs(t, "1.34.4", api.HighlyAvailable), api.Audit{Profile: api.AuditWriteRequestBodies, MaxAgeDays: 3})
	kas, _ := Lookup(api.ComponentKubeAPIServer)
	d := desired(t, kas, in)
	for i, s := range d.Specs {
		want := map[string]string{
			"--audit-policy-file":   "/data/componentd/clusters/demo/audit-policy.yaml",
			"--audit-log-path":      "/data/componentd/clusters/demo/audit/kube-apiserver-" + strconv.Itoa(i) + ".log",
			"--audit-log-format":    "json",
			"--audit-log-maxage":    "3",
			"--audit-log-maxbackup": "3",
			"--audit-log-maxsize":   "100",
		}
		for name, v := range want {
			if got := flag(s.Args, name); got != v {
				t.Errorf("replica %d: %s=%s, want %s", i, name, got, v)
			}
		}
	}
}

func TestDesired_EncryptionConfigGoesToKubeAPIServerOnlyAndANewKeyRollsIt(t *testing.T) {
	plain := inputs(t, "1.34.4", api.SingleReplica)
	encrypted := inputs(t, "1.34.4", api.SingleReplica)
	encrypted.Files[FileEncryptionConfig] = []byte("kind: EncryptionConfiguration # key-a")
	rekeyed := inputs(t, "1.34.4", api.SingleReplica)
	rekeyed.Files[FileEncryptionConfig] = []byte("kind: EncryptionConfiguration # key-b")
	flag := "--encryption-provider-config=/data/componentd/clusters/demo/" + FileEncryptionConfig
	for _, c := range All() {
		p, e, r := desired(t, c, plain), desired(t, c, encrypted), desired(t, c, rekeyed)
		isAPIServer := c.Name == api.ComponentKubeAPIServer
		if got := slices.Contains(e.Specs[0].Args, flag); got != isAPIServer {
			t.Errorf("%s: passes %s = %v, want %v (args %v)", c.Name, flag, got, isAPIServer, e.Specs[0].Args)
		}
		if slices.ContainsFunc(p.Specs[0].Args, func(a string) bool { return strings.HasPrefix(a, "--encryption-provider-config") }) {
			t.Errorf("%s: passes --encryption-provider-config without a configuration to point at", c.Name)
		}
		if changed := p.Hash != e.Hash; changed != isAPIServer {
			t.Errorf("%s: hash changed = %v when encryption was turned on, want %v", c.Name, changed, isAPIServer)
		}
		if changed := e.Hash != r.Hash; changed != isAPIServer {
			t.Errorf("%s: hash changed = %v with a new encryption key, want %v", c.Name, changed, isAPIServer)
		}
	}
}

// The autoscaler runs only while the cluster has an autoscaled pool; its settings are
// arguments and Karpenter's are its environment, both hashed; and without its executable or the
// management kubeconfig it says it cannot run instead of failing the control plane.
func TestKarpenter_RunsOnlyWhenEnabled_ConfiguredByItsEnvironment(t *testing.T) {
	k, err := Lookup(api.ComponentKarpenter)
	if err != nil {
		t.Fatal(err)
	}
	in := inputs(t, "1.34.4", api.SingleReplica)
	on := desired(t, k, in)
	if on.Replicas != 1 || len(on.Specs) != 1 || on.Specs[0].Path != in.Autoscaler.Binary {
		t.Fatalf("enabled: %d replicas, specs %v", on.Replicas, on.Specs)
	}
	for _, want := range []string{"--cluster=demo", "--namespace=hostplane-demo", "--scale-down=true", "--unneeded-time=10m0s",
		"--management-kubeconfig=/data/management.kubeconfig", "--kubeconfig=" + in.path(KubeconfigFile(api.KubeconfigKarpenter))} {
		if !slices.Contains(on.Specs[0].Args, want) {
			t.Errorf("args %v lack %s", on.Specs[0].Args, want)
		}
	}
	for _, want := range []string{"METRICS_PORT=10300", "HEALTH_PROBE_PORT=10301", "DISABLE_LEADER_ELECTION=true"} {
		if !slices.Contains(on.Specs[0].Env, want) {
			t.Errorf("env %v lacks %s", on.Specs[0].Env, want)
		}
	}

	in.Autoscaler.Options.Scaling = api.ScaleUpOnly
	if up := desired(t, k, in); up.Hash == on.Hash || !slices.Contains(up.Specs[0].Args, "--scale-down=false") {
		t.Errorf("ScaleUpOnly: hash %s (was %s), args %v", up.Hash, on.Hash, up.Specs[0].Args)
	}
	in.Autoscaler.Options.Scaling = api.ScaleUpAndScaleDown
	in.Infra.AutoscalerPorts = []int{10400, 10401}
	if moved := desired(t, k, in); moved.Hash == on.Hash || !slices.Contains(moved.Specs[0].Env, "METRICS_PORT=10400") {
		t.Errorf("new ports: hash %s (was %s), env %v", moved.Hash, on.Hash, moved.Specs[0].Env)
	}

	in.Autoscaler.Enabled = false
	if off := desired(t, k, in); off.Replicas != 0 || len(off.Specs) != 0 {
		t.Errorf("disabled: %d replicas, %d specs, want none", off.Replicas, len(off.Specs))
	}

	for name, mutate := range map[string]func(*Inputs){
		"no executable":            func(in *Inputs) { in.Autoscaler.Binary = "" },
		"no management kubeconfig": func(in *Inputs) { in.Autoscaler.ManagementKubeconfig = "" },
	} {
		in := inputs(t, "1.34.4", api.SingleReplica)
		mutate(in)
		if _, err := k.Desired(in); !errors.Is(err, ErrCannotRun) {
			t.Errorf("%s: err %v, want ErrCannotRun", name, err)
		}
	}
}

// TestDesired_ComponentsRunWithTheCataloguesTuning checks that every replica of etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler runs with the release
// catalogue's settings for its policy (their flags once each, their environment), that
// turning a setting off rolls only its component, and that with none selected nothing of
// the catalogue remains.
func TestDesired_ComponentsRunWithTheCataloguesTuning(t *testing.T) {
	for _, policy := range []string{api.SingleReplica, api.HighlyAvailable} {
		t.Run(policy, func(t *testing.T) {
			in := inputs(t, "1.34.4", policy)
			rel, err := release.Lookup(in.Version)
			if err != nil {
				t.Fatal(err)
			}
			none, err := release.ParseSelection("none")
			if err != nil {
				t.Fatal(err)
			}
			bare := *in
			bare.Tuning = none
			tunedComponents := 0
			for _, name := range release.Components() {
				c, err := Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				settings := rel.Tuning(name, policy, release.Selection{})
				if len(settings) == 0 {
					continue
				}
				tunedComponents++
				tuned, plain := desired(t, c, in), desired(t, c, &bare)
				if tuned.Hash == plain.Hash {
					t.Errorf("%s: the same config hash with and without its tuning", name)
				}
				for i, spec := range tuned.Specs {
					for _, e := range release.Env(settings) {
						if !slices.Contains(spec.Env, e) {
							t.Errorf("%s: %s lacks %s in its environment %v", name, spec.Name, e, spec.Env)
						}
						if slices.Contains(plain.Specs[i].Env, e) {
							t.Errorf("%s: %s has %s with no tuning selected", name, spec.Name, e)
						}
					}
					for _, s := range settings {
						for _, a := range s.Args {
							flagName, value, _ := strings.Cut(a, "=")
							if got := flag(spec.Args, flagName); got != value {
								t.Errorf("%s: %s has %s=%q, want %q (setting %s)", name, spec.Name, flagName, got, value, s.Name)
							}
							n := 0
							for _, arg := range spec.Args {
								if strings.HasPrefix(arg, flagName+"=") {
									n++
								}
							}
							if n != 1 {
								t.Errorf("%s: %s has %s %d times, want once", name, spec.Name, flagName, n)
							}
						}
					}
				}
			}
			if tunedComponents < 2 {
				t.Errorf("%d components have settings in the catalogue; etcd and kube-apiserver should", tunedComponents)
			}
		})
	}
}

func TestDesired_TurningOffOneSettingRollsOnlyItsComponent(t *testing.T) {
	in := inputs(t, "1.34.4", api.SingleReplica)
	without, err := release.ParseSelection("-kube-apiserver/gc")
	if err != nil {
		t.Fatal(err)
	}
	other := *in
	other.Tuning = without
	for _, c := range All() {
		changed := desired(t, c, in).Hash != desired(t, c, &other).Hash
		if want := c.Name == api.ComponentKubeAPIServer; changed != want {
			t.Errorf("%s: hash changed = %v, want %v", c.Name, changed, want)
		}
	}
	for _, spec := range desired(t, kubeAPIServer(), &other).Specs {
		for _, e := range spec.Env {
			if strings.HasPrefix(e, "GOGC=") {
				t.Errorf("%s still has %s", spec.Name, e)
			}
		}
	}
}

// TestControllers_StartBesideKubeAPIServerWithTheirClientCAsFromFiles: kube-controller-manager
// and kube-scheduler start once etcd is Available (with kube-apiserver, not after it) yet
// still roll out after it, and read the client CAs of their secure port from files rather
// than from kube-apiserver at start-up (which would fail while it is not up yet); a new CA
// rolls them.
func TestControllers_StartBesideKubeAPIServerWithTheirClientCAsFromFiles(t *testing.T) {
	in := inputs(t, "1.34.4", api.SingleReplica)
	for _, c := range []*Component{kubeControllerManager(), kubeScheduler()} {
		if got := c.StartsAfter(); !slices.Equal(got, []string{api.ComponentEtcd}) {
			t.Errorf("%s starts after %v, want etcd only", c.Name, got)
		}
		if !slices.Equal(c.DependsOn, []string{api.ComponentKubeAPIServer}) {
			t.Errorf("%s depends on %v, want kube-apiserver", c.Name, c.DependsOn)
		}
		d := desired(t, c, in)
		for flagName, file := range map[string]string{
			"--client-ca-file":               FileClientCA,
			"--requestheader-client-ca-file": CertFile(api.CertFrontProxyCA),
		} {
			if got := flag(d.Specs[0].Args, flagName); got != in.path(file) {
				t.Errorf("%s %s=%q, want %q", c.Name, flagName, got, in.path(file))
			}
			changed := *in
			changed.Files = maps.Clone(in.Files)
			changed.Files[file] = append(slices.Clone(in.Files[file]), '\n')
			if desired(t, c, &changed).Hash == d.Hash {
				t.Errorf("%s: a new %s does not change its config hash", c.Name, file)
			}
		}
	}
	if got := kubeAPIServer().StartsAfter(); !slices.Equal(got, []string{api.ComponentEtcd}) {
		t.Errorf("kube-apiserver starts after %v, want etcd", got)
	}
}
