package kuberuntime

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
)

func mustRelease(t testing.TB, v string) release.Release {
	t.Helper()
	r, err := release.Lookup(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testInputs(t testing.TB, cluster, policy, version string) (Inputs, *testPKI) {
	t.Helper()
	tp := newTestPKI(t, cluster, EtcdMemberHosts(cluster, api.HighlyAvailable)...)
	return Inputs{Cluster: cluster, Policy: policy, Release: mustRelease(t, version), PKI: tp.pki, Seal: tp.seal}, tp
}

func mustRender(t testing.TB, in Inputs) *Objects {
	t.Helper()
	o, err := Render(in)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return o
}

func TestRender_SameInputsGiveIdenticalObjects(t *testing.T) {
	in, _ := testInputs(t, "det", api.HighlyAvailable, "1.34.4")
	a, err := json.Marshal(mustRender(t, in))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(mustRender(t, in))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two renders of the same inputs differ")
	}
}

func TestRender_ReplicasAndDisruptionBudgetsFollowThePolicy(t *testing.T) {
	for _, tc := range []struct {
		name, policy          string
		etcd, apiserver, rest int32
		pdbs                  int
	}{
		{"SingleReplica", api.SingleReplica, 1, 1, 1, 0},
		{"EmptyMeansSingleReplica", "", 1, 1, 1, 0},
		{"HighlyAvailable", api.HighlyAvailable, 3, 2, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := testInputs(t, "pol", tc.policy, "1.34.4")
			o := mustRender(t, in)
			if got := *o.StatefulSets[0].Spec.Replicas; got != tc.etcd {
				t.Errorf("etcd replicas = %d, want %d", got, tc.etcd)
			}
			for _, d := range o.Deployments {
				want := tc.rest
				if *d.Name == api.ComponentKubeAPIServer {
					want = tc.apiserver
				}
				if *d.Spec.Replicas != want {
					t.Errorf("%s replicas = %d, want %d", *d.Name, *d.Spec.Replicas, want)
				}
			}
			if len(o.PodDisruptionBudgets) != tc.pdbs {
				t.Errorf("%d PodDisruptionBudgets, want %d", len(o.PodDisruptionBudgets), tc.pdbs)
			}
			// Every member is named in --initial-cluster.
			args := o.StatefulSets[0].Spec.Template.Spec.Containers[0].Args
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--initial-cluster=") })
			if n := int32(strings.Count(args[i], "=https://")); n != tc.etcd {
				t.Errorf("--initial-cluster names %d members, want %d: %s", n, tc.etcd, args[i])
			}
		})
	}
}

func TestRender_ANewReleaseChangesTheKubernetesComponentsHashesButNotEtcds(t *testing.T) {
	in, _ := testInputs(t, "up", api.SingleReplica, "1.33.13")
	in.EtcdImage = mustRelease(t, "1.33.13").Images[release.Etcd] // what Apply pins
	old := mustRender(t, in)
	in.Release = mustRelease(t, "1.34.4")
	upgraded := mustRender(t, in)
	for _, c := range Components() {
		changed := old.ConfigHashes[c] != upgraded.ConfigHashes[c]
		if want := c != api.ComponentEtcd; changed != want {
			t.Errorf("%s: hash changed = %v, want %v", c, changed, want)
		}
	}
}

func TestRender_ARenewedCertificateRollsOnlyTheComponentsMountingIt(t *testing.T) {
	in, tp := testInputs(t, "rot", api.HighlyAvailable, "1.34.4")
	before := mustRender(t, in)
	tp.issue(t, api.CertEtcdServer)
	after := mustRender(t, in)
	for _, c := range Components() {
		changed := before.ConfigHashes[c] != after.ConfigHashes[c]
		if want := c == api.ComponentEtcd; changed != want {
			t.Errorf("%s: hash changed = %v after renewing etcd-server, want %v", c, changed, want)
		}
	}
	tp.issue(t, api.CertControllerManager)
	again := mustRender(t, in)
	for _, c := range Components() {
		changed := after.ConfigHashes[c] != again.ConfigHashes[c]
		if want := c == api.ComponentControllerManager; changed != want {
			t.Errorf("%s: hash changed = %v after renewing controller-manager, want %v", c, changed, want)
		}
	}
}

func TestRender_RefusesEtcdCertificatesThatDoNotNameTheMembers(t *testing.T) {
	tp := newTestPKI(t, "sans") // localhost and 127.0.0.1 only, as for the process runtime
	_, err := Render(Inputs{Cluster: "sans", Release: mustRelease(t, "1.34.4"), PKI: tp.pki, Seal: tp.seal})
	if !errors.Is(err, ErrCertificateSANs) {
		t.Fatalf("Render = %v, want ErrCertificateSANs", err)
	}

	wild := newTestPKI(t, "wild", "*."+EtcdDiscoveryService+"."+Namespace("wild")+".svc")
	if _, err := Render(Inputs{Cluster: "wild", Policy: api.HighlyAvailable, Release: mustRelease(t, "1.34.4"),
		PKI: wild.pki, Seal: wild.seal}); err != nil {
		t.Fatalf("a wildcard etcd certificate: Render = %v", err)
	}
}

func TestRender_RejectsInvalidInputs(t *testing.T) {
	good, _ := testInputs(t, "bad", api.SingleReplica, "1.34.4")
	for name, tc := range map[string]struct {
		mutate func(*Inputs)
		want   error
	}{
		"no cluster":       {func(in *Inputs) { in.Cluster = "" }, ErrInvalidInputs},
		"bad cluster name": {func(in *Inputs) { in.Cluster = "Not_A_Label" }, ErrInvalidInputs},
		"unknown policy":   {func(in *Inputs) { in.Policy = "Sometimes" }, ErrInvalidInputs},
		"no PKI":           {func(in *Inputs) { in.PKI = nil }, ErrInvalidInputs},
		"no release":       {func(in *Inputs) { in.Release = release.Release{} }, ErrInvalidInputs},
		"missing leaf": {func(in *Inputs) {
			p := *in.PKI
			p.Certs = map[string]api.CertBundle{}
			for k, v := range in.PKI.Certs {
				if k != api.CertFrontProxyClient {
					p.Certs[k] = v
				}
			}
			in.PKI = &p
		}, ErrIncompletePKI},
		"wrong seal key": {func(in *Inputs) { in.Seal = newSealKey(t) }, certs.ErrSealed},
	} {
		t.Run(name, func(t *testing.T) {
			in := good
			tc.mutate(&in)
			if _, err := Render(in); !errors.Is(err, tc.want) {
				t.Fatalf("Render = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRender_PodsRunAsNonRootWithProbesAndRequests(t *testing.T) {
	in, _ := testInputs(t, "pods", api.HighlyAvailable, "1.34.4")
	o := mustRender(t, in)
	templates := podTemplates(t, o)
	for _, c := range Components() {
		tmpl := templates[c]
		if tmpl == nil {
			t.Fatalf("no pod template for %s", c)
		}
		if tmpl.Annotations[AnnotationConfigHash] != o.ConfigHashes[c] || o.ConfigHashes[c] == "" {
			t.Errorf("%s: config-hash annotation %q, ConfigHashes %q", c, tmpl.Annotations[AnnotationConfigHash], o.ConfigHashes[c])
		}
		ps := tmpl.Spec
		if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
			ps.SecurityContext.RunAsUser == nil || *ps.SecurityContext.RunAsUser == 0 {
			t.Errorf("%s: pod does not run as a non-root user: %+v", c, ps.SecurityContext)
		}
		ctr := ps.Containers[0]
		if ctr.Image != in.Release.Images[c] {
			t.Errorf("%s: image %q, want %q", c, ctr.Image, in.Release.Images[c])
		}
		if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.LivenessProbe == nil {
			t.Errorf("%s: want httpGet readiness and liveness probes", c)
		}
		if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no resource requests", c)
		}
		// Every file an argument names is in a mounted Secret.
		for _, a := range ctr.Args {
			_, path, ok := strings.Cut(a, "=")
			if !ok || !strings.HasPrefix(path, "/etc/hostplane/") {
				continue
			}
			if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
				return strings.HasPrefix(path, m.MountPath+"/")
			}) {
				t.Errorf("%s: %s is not under a mounted volume", c, a)
			}
		}
	}
	probe := templates[api.ComponentKubeAPIServer].Spec.Containers[0].ReadinessProbe.HTTPGet
	if probe.Path != "/readyz" || probe.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("kube-apiserver readiness probe = %s %s, want HTTPS /readyz", probe.Scheme, probe.Path)
	}
}

func TestRender_HighlyAvailableReplicasMustRunOnDifferentNodes(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		required     bool
	}{
		// Two etcd members on one node would take the quorum with it.
		{"HighlyAvailable", api.HighlyAvailable, true},
		// One replica: a preference, so a rolling update's surge pod may share its node.
		{"SingleReplica", api.SingleReplica, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, _ := testInputs(t, "spread", tc.policy, "1.34.4")
			templates := podTemplates(t, mustRender(t, in))
			for _, c := range Components() {
				aff := templates[c].Spec.Affinity
				if aff == nil || aff.PodAntiAffinity == nil {
					t.Fatalf("%s: no pod anti-affinity", c)
				}
				var term corev1.PodAffinityTerm
				required, preferred := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				switch {
				case tc.required && len(required) == 1 && len(preferred) == 0:
					term = required[0]
				case !tc.required && len(required) == 0 && len(preferred) == 1:
					term = preferred[0].PodAffinityTerm
				default:
					t.Fatalf("%s: anti-affinity required %v, preferred %v; want it required=%v", c, required, preferred, tc.required)
				}
				if term.TopologyKey != corev1.LabelHostname {
					t.Errorf("%s: topology key %q, want %q", c, term.TopologyKey, corev1.LabelHostname)
				}
				// The term selects the component's own pods, which its template carries.
				sel := term.LabelSelector.MatchLabels
				if len(sel) == 0 || sel[LabelComponent] != c {
					t.Errorf("%s: anti-affinity selects %v", c, sel)
				}
				for k, v := range sel {
					if templates[c].Labels[k] != v {
						t.Errorf("%s: anti-affinity selects %s=%s, which its pods do not carry", c, k, v)
					}
				}
			}
		})
	}
}

// A replaced kube-apiserver pod keeps serving while clients move off it, then is gone within
// seconds, not the minute that made every replica of a HighlyAvailable rollout wait
// (TestComponentd_KubernetesRuntime_OnRealKubelets_HighlyAvailableUpgradeAndRotationKeepTheAPIUp).
func TestRender_KubeAPIServerKeepsServingAfterSIGTERMThenStopsWithinSeconds(t *testing.T) {
	for _, policy := range []string{api.HighlyAvailable, api.SingleReplica} {
		in, _ := testInputs(t, "stop", policy, "1.34.4")
		ps := podTemplates(t, mustRender(t, in))[api.ComponentKubeAPIServer].Spec
		if !slices.Contains(ps.Containers[0].Args, "--shutdown-delay-duration=3s") {
			t.Errorf("%s: kube-apiserver has no --shutdown-delay-duration=3s", policy)
		}
		if !slices.Contains(ps.Containers[0].Args, kube.WatchTerminationGraceArg) {
			t.Errorf("%s: kube-apiserver has no %s: open watches keep it running until it is killed", policy, kube.WatchTerminationGraceArg)
		}
		if g := ps.TerminationGracePeriodSeconds; g == nil || *g <= 3 || *g > 15 {
			t.Errorf("%s: kube-apiserver terminationGracePeriodSeconds %s, want more than the 3 s delay and at most 15 s", policy, grace(g))
		}
	}
}

// grace shows a pod's terminationGracePeriodSeconds.
func grace(s *int64) string {
	if s == nil {
		return "unset (30)"
	}
	return strconv.FormatInt(*s, 10)
}

// podTemplates returns the pod template of every workload in o, by workload name.
func podTemplates(t testing.TB, o *Objects) map[string]*corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]*corev1.PodTemplateSpec{}
	for _, s := range o.StatefulSets {
		out[*s.Name] = roundTrip[corev1.PodTemplateSpec](t, s.Spec.Template)
	}
	for _, d := range o.Deployments {
		out[*d.Name] = roundTrip[corev1.PodTemplateSpec](t, d.Spec.Template)
	}
	return out
}

// roundTrip converts an apply configuration into the typed object it describes.
func roundTrip[T any](t testing.TB, v any) *T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRender_KubeAPIServerEncryptsSecretsWithTheClustersKeyAndANewKeyRollsOnlyIt(t *testing.T) {
	in, tp := testInputs(t, "enc", api.SingleReplica, "1.34.4")
	o := mustRender(t, in)
	var cfg []byte
	for _, s := range o.Secrets {
		if *s.Name == SecretEncryptionConfig {
			cfg = s.Data[KeyEncryptionConfig]
			if s.Labels[LabelComponent] != api.ComponentKubeAPIServer {
				t.Errorf("encryption config Secret labels %v", s.Labels)
			}
		}
	}
	if !bytes.Contains(cfg, []byte("kind: EncryptionConfiguration")) || !bytes.Contains(cfg, []byte("name: key-first")) {
		t.Fatalf("Secret %s holds:\n%s", SecretEncryptionConfig, cfg)
	}
	flag := "--encryption-provider-config=" + secretFile(SecretEncryptionConfig, KeyEncryptionConfig)
	for _, d := range o.Deployments {
		pod := d.Spec.Template.Spec
		isAPIServer := *d.Name == api.ComponentKubeAPIServer
		if got := slices.Contains(pod.Containers[0].Args, flag); got != isAPIServer {
			t.Errorf("%s passes %s = %v, want %v", *d.Name, flag, got, isAPIServer)
		}
		mounted := slices.ContainsFunc(pod.Volumes, func(v corev1ac.VolumeApplyConfiguration) bool {
			return v.Secret != nil && *v.Secret.SecretName == SecretEncryptionConfig
		})
		if mounted != isAPIServer {
			t.Errorf("%s mounts the encryption config = %v, want %v", *d.Name, mounted, isAPIServer)
		}
	}

	tp.rekey(t, "key-second")
	rekeyed := mustRender(t, in)
	for _, c := range Components() {
		changed := o.ConfigHashes[c] != rekeyed.ConfigHashes[c]
		if want := c == api.ComponentKubeAPIServer; changed != want {
			t.Errorf("%s: hash changed = %v after a new encryption key, want %v", c, changed, want)
		}
	}

	tp.pki.SecretEncryption = nil // a record pkid has not given a key yet
	plain := mustRender(t, in)
	for _, s := range plain.Secrets {
		if *s.Name == SecretEncryptionConfig {
			t.Errorf("Secret %s rendered without keys", SecretEncryptionConfig)
		}
	}
	for _, d := range plain.Deployments {
		if slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--encryption-provider-config") }) {
			t.Errorf("%s passes --encryption-provider-config without keys", *d.Name)
		}
	}
}

// TestRender_ContainersRunWithTheCataloguesTuning checks that each component's container
// carries the release catalogue's settings for the policy (environment and flags), as the
// process runtime's processes do, and none of them with no setting selected.
func TestRender_ContainersRunWithTheCataloguesTuning(t *testing.T) {
	for _, policy := range []string{api.SingleReplica, api.HighlyAvailable} {
		in, _ := testInputs(t, "tuned", policy, "1.34.4")
		none, err := release.ParseSelection("none")
		if err != nil {
			t.Fatal(err)
		}
		bare := in
		bare.Tuning = none
		containers := func(o *Objects) map[string]*corev1ac.ContainerApplyConfiguration {
			out := map[string]*corev1ac.ContainerApplyConfiguration{}
			for _, s := range o.StatefulSets {
				out[*s.Name] = &s.Spec.Template.Spec.Containers[0]
			}
			for _, d := range o.Deployments {
				out[*d.Name] = &d.Spec.Template.Spec.Containers[0]
			}
			return out
		}
		tuned, plain := mustRender(t, in), mustRender(t, bare)
		tc, pc := containers(tuned), containers(plain)
		for _, comp := range Components() {
			settings := in.Release.Tuning(comp, policy, release.Selection{})
			if len(settings) == 0 {
				if tuned.ConfigHashes[comp] != plain.ConfigHashes[comp] {
					t.Errorf("%s %s has no setting, yet its config hash depends on the selection", policy, comp)
				}
				continue
			}
			if tuned.ConfigHashes[comp] == plain.ConfigHashes[comp] {
				t.Errorf("%s %s: the same config hash with and without its tuning", policy, comp)
			}
			env := func(c *corev1ac.ContainerApplyConfiguration) []string {
				var out []string
				for _, e := range c.Env {
					if e.Value != nil {
						out = append(out, *e.Name+"="+*e.Value)
					}
				}
				return out
			}
			for _, e := range release.Env(settings) {
				if !slices.Contains(env(tc[comp]), e) {
					t.Errorf("%s %s: container lacks %s", policy, comp, e)
				}
				if slices.Contains(env(pc[comp]), e) {
					t.Errorf("%s %s: container has %s with no tuning selected", policy, comp, e)
				}
			}
			for _, s := range settings {
				for _, a := range s.Args {
					if !slices.Contains(tc[comp].Args, a) {
						t.Errorf("%s %s: container lacks %s (setting %s)", policy, comp, a, s.Name)
					}
				}
			}
		}
	}
}
