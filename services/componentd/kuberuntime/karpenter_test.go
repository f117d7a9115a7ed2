package kuberuntime

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
)

const testKarpenterImage = "hostplane/componentd:test"

// withKarpenter enables the autoscaler in in, scaling up only with a 2-minute unneeded time.
func withKarpenter(in Inputs) Inputs {
	unneeded := int32(120)
	in.Karpenter = Karpenter{Enabled: true, Image: testKarpenterImage, Options: api.ClusterAutoscaling{
		Scaling: api.ScaleUpOnly, ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: &unneeded}}}
	return in
}

func deployment(t *testing.T, o *Objects, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range o.Deployments {
		if *d.Name == name {
			return roundTrip[appsv1.Deployment](t, d)
		}
	}
	return nil
}

func TestRender_KarpenterEnabled_RunsOneRecreatedReplicaWithItsGuestKubeconfigAndAManagementRole(t *testing.T) {
	// HighlyAvailable: the autoscaler still runs one replica, without a disruption budget.
	in, _ := testInputs(t, "auto", api.HighlyAvailable, "1.34.4")
	in = withKarpenter(in)
	o := mustRender(t, in)
	ns := Namespace("auto")

	d := deployment(t, o, api.ComponentKarpenter)
	if d == nil {
		t.Fatalf("no %s Deployment among %d", api.ComponentKarpenter, len(o.Deployments))
	}
	if d.Namespace != ns || d.Labels[LabelComponent] != api.ComponentKarpenter || d.Labels[LabelCluster] != "auto" {
		t.Errorf("Deployment %s/%s labels %v", d.Namespace, d.Name, d.Labels)
	}
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("replicas %d, strategy %+v; want 1 replica, Recreate", *d.Spec.Replicas, d.Spec.Strategy)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != KarpenterServiceAccount || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Errorf("pod ServiceAccount %q automount %v; want %q with its token (in-cluster config)",
			pod.ServiceAccountName, pod.AutomountServiceAccountToken, KarpenterServiceAccount)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != testKarpenterImage || !slices.Equal(c.Command, []string{"/usr/local/bin/hostplane-karpenter"}) {
		t.Errorf("image %q command %v", c.Image, c.Command)
	}
	kubeconfig := "/etc/hostplane/" + SecretKarpenterKubeconfig + "/" + KeyKubeconfig
	wantArgs := []string{"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--cluster=auto", "--scale-down=false", "--unneeded-time=2m0s"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %v, want %v (and no --management-kubeconfig)", c.Args, wantArgs)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"METRICS_PORT": "8080", "HEALTH_PROBE_PORT": "8081", "DISABLE_LEADER_ELECTION": "true"} {
		if env[k] != v {
			t.Errorf("env %s=%q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["HOSTPLANE_MANAGEMENT_KUBECONFIG"]; ok {
		t.Error("env names a management kubeconfig")
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" ||
		p.HTTPGet.Port.IntValue() != KarpenterHealthPort || p.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("readiness probe %+v, want HTTP /readyz on %d", p, KarpenterHealthPort)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no resource requests: %v", c.Resources.Requests)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == secretDir(SecretKarpenterKubeconfig) && m.ReadOnly
	}) || !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == SecretKarpenterKubeconfig
	}) {
		t.Errorf("the Secret %s is not mounted read-only at %s: mounts %+v", SecretKarpenterKubeconfig, secretDir(SecretKarpenterKubeconfig), c.VolumeMounts)
	}
	if h := d.Spec.Template.Annotations[AnnotationConfigHash]; h == "" || h != o.ConfigHashes[api.ComponentKarpenter] {
		t.Errorf("config hash annotation %q, ConfigHashes %q", h, o.ConfigHashes[api.ComponentKarpenter])
	}
	for _, p := range o.PodDisruptionBudgets {
		if *p.Name == api.ComponentKarpenter {
			t.Error("a PodDisruptionBudget for the single autoscaler replica")
		}
	}
	// The other pods still get no ServiceAccount token.
	for _, other := range Components()[1:] {
		if p := deployment(t, o, other).Spec.Template.Spec; p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
			t.Errorf("%s mounts a ServiceAccount token", other)
		}
	}

	// Its guest kubeconfig: pkid's karpenter identity, through the kube-apiserver Service.
	var kc []byte
	for _, s := range o.Secrets {
		if *s.Name == SecretKarpenterKubeconfig {
			kc = s.Data[KeyKubeconfig]
			if s.Labels[LabelComponent] != api.ComponentKarpenter {
				t.Errorf("Secret %s labels %v", SecretKarpenterKubeconfig, s.Labels)
			}
		}
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatalf("Secret %s: %v", SecretKarpenterKubeconfig, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if want := "https://" + APIServerHost("auto") + ":6443"; cfg.Clusters[kctx.Cluster].Server != want {
		t.Errorf("kubeconfig server %q, want %q", cfg.Clusters[kctx.Cluster].Server, want)
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	kp, err := certs.ParseKeyPair(user.ClientCertificateData, user.ClientKeyData)
	if err != nil {
		t.Fatalf("kubeconfig credentials: %v", err)
	}
	if cn := kp.Cert.Subject.CommonName; cn != "system:hostplane:karpenter" {
		t.Errorf("kubeconfig user %q, want system:hostplane:karpenter", cn)
	}

	// Its management identity: exactly what the cloud provider does, in the namespace only.
	if len(o.ServiceAccounts) != 1 || *o.ServiceAccounts[0].Name != KarpenterServiceAccount || *o.ServiceAccounts[0].Namespace != ns {
		t.Errorf("ServiceAccounts %+v", o.ServiceAccounts)
	}
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinedeployments"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "create", "patch", "delete"}},
		{APIGroups: []string{"infrastructure.hostplane.dev"}, Resources: []string{"localmachines"}, Verbs: []string{"create"}},
	}
	if !slices.EqualFunc(KarpenterRules(), wantRules, rulesEqual) {
		t.Errorf("KarpenterRules %+v, want %+v", KarpenterRules(), wantRules)
	}
	if len(o.RoleBindings) != 1 {
		t.Fatalf("%d RoleBindings, want 1", len(o.RoleBindings))
	}
	rb := roundTrip[rbacv1.RoleBinding](t, o.RoleBindings[0])
	if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: KarpenterClusterRole}) || rb.Namespace != ns ||
		len(rb.Subjects) != 1 || rb.Subjects[0] != (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: KarpenterServiceAccount, Namespace: ns}) {
		t.Errorf("RoleBinding %+v", rb)
	}
}

func rulesEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
		len(a.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
}

func TestRender_KarpenterDisabled_RendersNoneOfItsObjects(t *testing.T) {
	in, _ := testInputs(t, "noauto", api.SingleReplica, "1.34.4")
	in.Karpenter = Karpenter{Image: testKarpenterImage} // an image alone enables nothing
	o := mustRender(t, in)
	if d := deployment(t, o, api.ComponentKarpenter); d != nil {
		t.Error("a karpenter Deployment while disabled")
	}
	if len(o.ServiceAccounts)+len(o.RoleBindings) != 0 {
		t.Errorf("%d ServiceAccounts, %d RoleBindings while disabled", len(o.ServiceAccounts), len(o.RoleBindings))
	}
	for _, s := range o.Secrets {
		if *s.Name == SecretKarpenterKubeconfig {
			t.Errorf("Secret %s while disabled", SecretKarpenterKubeconfig)
		}
	}
	if _, ok := o.ConfigHashes[api.ComponentKarpenter]; ok || !sameSet(slices.Collect(maps.Keys(o.ConfigHashes)), Components()) {
		t.Errorf("ConfigHashes %v, want the control plane's only", o.ConfigHashes)
	}
}

func TestRender_KarpenterOptionsChangeOnlyItsConfigHash(t *testing.T) {
	in, _ := testInputs(t, "opts", api.SingleReplica, "1.34.4")
	in = withKarpenter(in)
	before := mustRender(t, in)
	in.Karpenter.Options = api.ClusterAutoscaling{Scaling: api.ScaleUpAndScaleDown}
	after := mustRender(t, in)
	args := deployment(t, after, api.ComponentKarpenter).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--scale-down=true") || !slices.Contains(args, "--unneeded-time=10m0s") {
		t.Errorf("args %v, want scale-down with the default 10m", args)
	}
	for _, c := range append(Components(), api.ComponentKarpenter) {
		changed := before.ConfigHashes[c] != after.ConfigHashes[c]
		if want := c == api.ComponentKarpenter; changed != want {
			t.Errorf("%s: hash changed = %v after new autoscaling options, want %v", c, changed, want)
		}
	}
	in.Karpenter.Image = "hostplane/componentd:next"
	if again := mustRender(t, in); again.ConfigHashes[api.ComponentKarpenter] == after.ConfigHashes[api.ComponentKarpenter] {
		t.Error("a new autoscaler image left its config hash unchanged")
	}
}

func TestRender_KarpenterEnabledWithoutItsImageOrCertificate_IsRefused(t *testing.T) {
	in, _ := testInputs(t, "refuse", api.SingleReplica, "1.34.4")
	in = withKarpenter(in)
	noImage := in
	noImage.Karpenter.Image = ""
	if _, err := Render(noImage); !errors.Is(err, ErrInvalidInputs) || !strings.Contains(err.Error(), "image") {
		t.Errorf("Render without an autoscaler image = %v, want ErrInvalidInputs", err)
	}
	p := *in.PKI
	p.Certs = maps.Clone(in.PKI.Certs)
	delete(p.Certs, api.CertKarpenter)
	in.PKI = &p
	if _, err := Render(in); !errors.Is(err, ErrIncompletePKI) {
		t.Errorf("Render without the karpenter certificate = %v, want ErrIncompletePKI", err)
	}
	in.Karpenter.Enabled = false
	if _, err := Render(in); err != nil {
		t.Errorf("Render without the karpenter certificate, autoscaler disabled = %v, want it rendered", err)
	}
}
