package kuberuntime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// TestRuntime runs against one real management kube-apiserver (with etcd, without a
// kube-controller-manager or kubelet: no pod ever runs, and workload status stays empty).
// Each subtest uses a cluster of its own.
func TestRuntime(t *testing.T) {
	kc := testenv.KubeAPIServer(t)
	rt, err := New(kc.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(kc.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("Apply_CreatesTheNamespaceAndEveryObjectWithOwnerLabels", func(t *testing.T) {
		in, _ := testInputs(t, "ha", api.HighlyAvailable, "1.34.4")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		ns := Namespace("ha")
		nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace: %v", err)
		}
		checkOwnerLabels(t, "namespace", nsObj.ObjectMeta, "ha")

		wantSecrets := []string{SecretRootCA, SecretEtcdServer, SecretEtcdPeer, SecretEtcdClient, SecretAPIServer,
			SecretAPIServerKubeletClient, SecretFrontProxyClient, SecretKubeletSigner, SecretServiceAccount,
			SecretControllerManagerKubeconfig, SecretSchedulerKubeconfig, SecretAdminKubeconfig, SecretAuditPolicy, SecretEncryptionConfig}
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range secrets.Items {
			got = append(got, s.Name)
			checkOwnerLabels(t, "secret "+s.Name, s.ObjectMeta, "ha")
		}
		if !sameSet(got, wantSecrets) {
			t.Errorf("secrets %v, want %v", got, wantSecrets)
		}

		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, s := range svcs.Items {
			got = append(got, s.Name)
			checkOwnerLabels(t, "service "+s.Name, s.ObjectMeta, "ha")
			if s.Name == EtcdDiscoveryService && (s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses) {
				t.Errorf("etcd-discovery is not headless with publishNotReadyAddresses: %+v", s.Spec)
			}
		}
		if !sameSet(got, []string{EtcdDiscoveryService, APIServerService}) {
			t.Errorf("services %v", got)
		}

		rel := mustRelease(t, "1.34.4")
		sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, api.ComponentEtcd, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("etcd StatefulSet: %v", err)
		}
		checkOwnerLabels(t, "statefulset etcd", sts.ObjectMeta, "ha")
		checkOwnerLabels(t, "etcd pod template", sts.Spec.Template.ObjectMeta, "ha")
		if *sts.Spec.Replicas != 3 {
			t.Errorf("etcd replicas = %d, want 3", *sts.Spec.Replicas)
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; img != rel.Images[release.Etcd] {
			t.Errorf("etcd image %q, want %q", img, rel.Images[release.Etcd])
		}
		for _, c := range Components()[1:] {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, c, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Deployment %s: %v", c, err)
			}
			checkOwnerLabels(t, "deployment "+c, d.ObjectMeta, "ha")
			checkOwnerLabels(t, c+" pod template", d.Spec.Template.ObjectMeta, "ha")
			if *d.Spec.Replicas != 2 {
				t.Errorf("%s replicas = %d, want 2", c, *d.Spec.Replicas)
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != rel.Images[c] {
				t.Errorf("%s image %q, want %q", c, img, rel.Images[c])
			}
			if d.Spec.Template.Annotations[AnnotationConfigHash] == "" {
				t.Errorf("%s pod template has no config hash", c)
			}
		}
		pdbs, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, p := range pdbs.Items {
			got = append(got, p.Name)
			checkOwnerLabels(t, "pdb "+p.Name, p.ObjectMeta, "ha")
		}
		if !sameSet(got, Components()) {
			t.Errorf("PodDisruptionBudgets %v, want one per component", got)
		}
	})

	t.Run("Secrets_HoldTheOpenedKeysNotTheSealedBytes", func(t *testing.T) {
		in, tp := testInputs(t, "keys", api.SingleReplica, "1.34.4")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		ns := Namespace("keys")
		for _, name := range []string{SecretEtcdServer, SecretAPIServer, SecretKubeletSigner} {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Type != corev1.SecretTypeTLS {
				t.Errorf("%s: type %q, want %q", name, s.Type, corev1.SecretTypeTLS)
			}
			if _, err := certs.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
				t.Errorf("%s: tls.crt and tls.key are not a key pair: %v", name, err)
			}
			if _, err := certs.ParseCertificate(s.Data[KeyCA]); err != nil {
				t.Errorf("%s: ca.crt: %v", name, err)
			}
		}
		apiserverKey := tp.pki.Certs[api.CertAPIServer].SealedKey
		s, _ := cs.CoreV1().Secrets(ns).Get(ctx, SecretAPIServer, metav1.GetOptions{})
		if string(s.Data[corev1.TLSPrivateKeyKey]) == string(apiserverKey) {
			t.Error("kube-apiserver-serving holds the sealed key")
		}

		sa, err := cs.CoreV1().Secrets(ns).Get(ctx, SecretServiceAccount, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sa.Type != corev1.SecretTypeOpaque {
			t.Errorf("service-account-key type %q, want Opaque", sa.Type)
		}
		if _, err := certs.ParseSigningKey(sa.Data[KeyServiceAccountKey]); err != nil {
			t.Errorf("service-account.key: %v", err)
		}

		kcm, err := cs.CoreV1().Secrets(ns).Get(ctx, SecretControllerManagerKubeconfig, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load(kcm.Data[KeyKubeconfig])
		if err != nil {
			t.Fatalf("kube-controller-manager kubeconfig: %v", err)
		}
		cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
		if want := "https://" + APIServerHost("keys") + ":6443"; cl.Server != want {
			t.Errorf("kube-controller-manager kubeconfig server %q, want %q", cl.Server, want)
		}
		user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
		kp, err := certs.ParseKeyPair(user.ClientCertificateData, user.ClientKeyData)
		if err != nil {
			t.Fatalf("kube-controller-manager kubeconfig credentials: %v", err)
		}
		if cn := kp.Cert.Subject.CommonName; cn != "system:kube-controller-manager" {
			t.Errorf("kube-controller-manager kubeconfig user %q", cn)
		}
		admin, _ := cs.CoreV1().Secrets(ns).Get(ctx, SecretAdminKubeconfig, metav1.GetOptions{})
		if _, err := clientcmd.Load(admin.Data[KeyKubeconfig]); err != nil {
			t.Errorf("admin kubeconfig: %v", err)
		}
	})

	t.Run("ApplyTwice_ChangesNothing", func(t *testing.T) {
		in, _ := testInputs(t, "twice", api.HighlyAvailable, "1.34.4")
		in = withKarpenter(in)
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		before := resourceVersions(t, ctx, cs, "twice")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("second Apply: %v", err)
		}
		after := resourceVersions(t, ctx, cs, "twice")
		if !maps.Equal(before, after) {
			for k, v := range after {
				if before[k] != v {
					t.Errorf("%s: resourceVersion %s → %s", k, before[k], v)
				}
			}
		}
	})

	t.Run("AReleaseUpgrade_RollsKubeAPIServerButNotEtcd", func(t *testing.T) {
		in, _ := testInputs(t, "upgrade", api.SingleReplica, "1.33.13")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply 1.33.13: %v", err)
		}
		ns := Namespace("upgrade")
		etcd0, _ := cs.AppsV1().StatefulSets(ns).Get(ctx, api.ComponentEtcd, metav1.GetOptions{})
		kas0, _ := cs.AppsV1().Deployments(ns).Get(ctx, api.ComponentKubeAPIServer, metav1.GetOptions{})

		in.Release = mustRelease(t, "1.34.4")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply 1.34.4: %v", err)
		}
		etcd1, _ := cs.AppsV1().StatefulSets(ns).Get(ctx, api.ComponentEtcd, metav1.GetOptions{})
		kas1, _ := cs.AppsV1().Deployments(ns).Get(ctx, api.ComponentKubeAPIServer, metav1.GetOptions{})

		if h0, h1 := kas0.Spec.Template.Annotations[AnnotationConfigHash], kas1.Spec.Template.Annotations[AnnotationConfigHash]; h0 == h1 {
			t.Errorf("kube-apiserver config hash unchanged (%s) by the upgrade", h0)
		}
		if img := kas1.Spec.Template.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:v1.34.4" {
			t.Errorf("kube-apiserver image %q after the upgrade", img)
		}
		if kas1.Generation == kas0.Generation {
			t.Error("kube-apiserver Deployment generation unchanged: no rollout")
		}
		if etcd1.ResourceVersion != etcd0.ResourceVersion {
			t.Errorf("etcd StatefulSet changed by the upgrade (resourceVersion %s → %s)", etcd0.ResourceVersion, etcd1.ResourceVersion)
		}
		if img := etcd1.Spec.Template.Spec.Containers[0].Image; img != mustRelease(t, "1.33.13").Images[release.Etcd] {
			t.Errorf("etcd image %q after the upgrade, want the one it was created with", img)
		}

		status, err := rt.Status(ctx, "upgrade")
		if err != nil {
			t.Fatal(err)
		}
		if got := status[api.ComponentKubeAPIServer]; got.ConfigHash != kas1.Spec.Template.Annotations[AnnotationConfigHash] ||
			got.Image != "registry.k8s.io/kube-apiserver:v1.34.4" {
			t.Errorf("Status(kube-apiserver) = %+v", got)
		}
	})

	t.Run("Status_ReportsDesiredReplicasAndNoRolloutWithoutKubelets", func(t *testing.T) {
		in, _ := testInputs(t, "status", api.HighlyAvailable, "1.34.4")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		o := mustRender(t, in)
		status, err := rt.Status(ctx, "status")
		if err != nil {
			t.Fatal(err)
		}
		if !sameSet(slices.Collect(maps.Keys(status)), Components()) {
			t.Fatalf("Status has %v, want every component", slices.Collect(maps.Keys(status)))
		}
		for c, s := range status {
			if s.Replicas != int32(Replicas(c, api.HighlyAvailable)) || s.ConfigHash != o.ConfigHashes[c] {
				t.Errorf("%s: %+v, want %d replicas and hash %s", c, s, Replicas(c, api.HighlyAvailable), o.ConfigHashes[c])
			}
			// No controller runs on this apiserver: nothing is ready, nothing rolled out.
			if s.ReadyReplicas != 0 || s.RolloutComplete || s.Available {
				t.Errorf("%s: %+v, want nothing ready", c, s)
			}
		}
		if none, err := rt.Status(ctx, "never-applied"); err != nil || len(none) != 0 {
			t.Errorf("Status of an unknown cluster = %v, %v; want empty", none, err)
		}
	})

	t.Run("Apply_PrunesWhatItNoLongerRenders", func(t *testing.T) {
		in, _ := testInputs(t, "prune", api.HighlyAvailable, "1.34.4")
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		in.Policy = api.SingleReplica
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply SingleReplica: %v", err)
		}
		pdbs, err := cs.PolicyV1().PodDisruptionBudgets(Namespace("prune")).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pdbs.Items) != 0 {
			t.Errorf("%d PodDisruptionBudgets left after leaving HighlyAvailable", len(pdbs.Items))
		}
	})

	t.Run("Hibernate_ScalesEveryWorkloadTo0KeepsTheRest_TheWakesApplyStartsEtcdAndKubeAPIServerFirst", func(t *testing.T) {
		in, _ := testInputs(t, "sleepy", api.HighlyAvailable, "1.34.4")
		in = withKarpenter(in)
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		ns := Namespace("sleepy")
		// No controller runs here: what a StatefulSet controller and a kubelet would have made.
		owned := ownerMeta("sleepy")
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: owned("data-etcd-0"), Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		no := false
		pod := &corev1.Pod{ObjectMeta: owned("etcd-0"), Spec: corev1.PodSpec{
			ServiceAccountName: KarpenterServiceAccount, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: api.ComponentEtcd, Image: "etcd"}},
		}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kept := func() (secrets, services int) {
			sl, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			vl, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return len(sl.Items), len(vl.Items)
		}
		secretsBefore, servicesBefore := kept()

		p, err := rt.Hibernate(ctx, "sleepy")
		if err != nil {
			t.Fatalf("Hibernate: %v", err)
		}
		if p.Stopped || p.Pods != 1 {
			t.Errorf("Hibernate with a pod left = %+v, want not stopped, 1 pod", p)
		}
		replicas := func() map[string]int32 {
			status, err := rt.Status(ctx, "sleepy")
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int32{}
			for c, s := range status {
				out[c] = s.Replicas
			}
			return out
		}
		want := map[string]int32{}
		for _, c := range append(Components(), api.ComponentKarpenter) {
			want[c] = 0
		}
		if got := replicas(); !maps.Equal(got, want) {
			t.Errorf("replicas after Hibernate %v, want %v", got, want)
		}
		if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		if p, err := rt.Hibernate(ctx, "sleepy"); err != nil || !p.Stopped || p.Pods != 0 {
			t.Errorf("Hibernate once the pods are gone = %+v, %v; want stopped", p, err)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("etcd's claim after Hibernate: %v", err)
		}
		if secrets, services := kept(); secrets != secretsBefore || services != servicesBefore {
			t.Errorf("after Hibernate %d secrets and %d services, want %d and %d", secrets, services, secretsBefore, servicesBefore)
		}

		// Waking is Apply: etcd and kube-apiserver first, the rest held at 0 while
		// kube-apiserver is not Available.
		wake := func() []string {
			t.Helper()
			status, err := rt.Status(ctx, "sleepy")
			if err != nil {
				t.Fatal(err)
			}
			in.Held = HeldOnWake(status)
			if _, err := rt.Apply(ctx, in); err != nil {
				t.Fatalf("Apply after Hibernate: %v", err)
			}
			return in.Held
		}
		dependents := []string{api.ComponentControllerManager, api.ComponentScheduler, api.ComponentKarpenter}
		if held := wake(); !slices.Equal(held, dependents) {
			t.Errorf("held on wake %v, want %v", held, dependents)
		}
		want[api.ComponentEtcd], want[api.ComponentKubeAPIServer] = 3, 2
		if got := replicas(); !maps.Equal(got, want) {
			t.Errorf("replicas after the wake's first Apply %v, want %v", got, want)
		}
		if held := wake(); !slices.Equal(held, dependents) { // no controller: kube-apiserver never gets Available
			t.Errorf("held on wake while kube-apiserver is not Available %v, want %v", held, dependents)
		}
		// What a Deployment controller reports once a kube-apiserver pod is ready.
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, api.ComponentKubeAPIServer, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
		if _, err := cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if held := wake(); held != nil {
			t.Errorf("held once kube-apiserver is Available %v, want none", held)
		}
		for _, c := range Components() {
			want[c] = int32(Replicas(c, api.HighlyAvailable))
		}
		want[api.ComponentKarpenter] = 1
		if got := replicas(); !maps.Equal(got, want) {
			t.Errorf("replicas once kube-apiserver is Available %v, want %v", got, want)
		}
		if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("etcd's claim after the wake: %v", err)
		}
		if p, err := rt.Hibernate(ctx, "never-applied"); err != nil || !p.Stopped {
			t.Errorf("Hibernate of an unknown cluster = %+v, %v; want stopped", p, err)
		}
	})

	t.Run("Karpenter_AppliedWhileEnabledAndDeletedOnceDisabled", func(t *testing.T) {
		in, _ := testInputs(t, "auto", api.SingleReplica, "1.34.4")
		in = withKarpenter(in)
		o, err := rt.Apply(ctx, in)
		if err != nil {
			t.Fatalf("Apply with the autoscaler: %v", err)
		}
		ns := Namespace("auto")
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, api.ComponentKarpenter, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("karpenter Deployment: %v", err)
		}
		checkOwnerLabels(t, "deployment karpenter", d.ObjectMeta, "auto")
		if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType ||
			d.Spec.Template.Spec.ServiceAccountName != KarpenterServiceAccount ||
			d.Spec.Template.Spec.Containers[0].Image != testKarpenterImage ||
			d.Spec.Template.Annotations[AnnotationConfigHash] != o.ConfigHashes[api.ComponentKarpenter] {
			t.Errorf("karpenter Deployment spec %+v", d.Spec)
		}
		sa, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, KarpenterServiceAccount, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("karpenter ServiceAccount: %v", err)
		}
		checkOwnerLabels(t, "serviceaccount karpenter", sa.ObjectMeta, "auto")
		rb, err := cs.RbacV1().RoleBindings(ns).Get(ctx, KarpenterServiceAccount, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("karpenter RoleBinding: %v", err)
		}
		checkOwnerLabels(t, "rolebinding karpenter", rb.ObjectMeta, "auto")
		if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != KarpenterClusterRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != ns {
			t.Errorf("RoleBinding %+v does not bind ClusterRole %s to the ServiceAccount", rb, KarpenterClusterRole)
		}
		if _, err := cs.CoreV1().Secrets(ns).Get(ctx, SecretKarpenterKubeconfig, metav1.GetOptions{}); err != nil {
			t.Errorf("Secret %s: %v", SecretKarpenterKubeconfig, err)
		}
		status, err := rt.Status(ctx, "auto")
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := status[api.ComponentKarpenter]; !ok || s.Kind != "Deployment" || s.Replicas != 1 ||
			s.ConfigHash != o.ConfigHashes[api.ComponentKarpenter] || s.Image != testKarpenterImage {
			t.Errorf("Status(karpenter) = %+v, %v", s, ok)
		}

		// Disabled (the last autoscaled pool gone): every object of the autoscaler goes,
		// the control plane's stay.
		before := resourceVersions(t, ctx, cs, "auto")
		in.Karpenter.Enabled = false
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply without the autoscaler: %v", err)
		}
		for what, get := range map[string]func() error{
			"deployment": func() error {
				_, err := cs.AppsV1().Deployments(ns).Get(ctx, api.ComponentKarpenter, metav1.GetOptions{})
				return err
			},
			"serviceaccount": func() error {
				_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, KarpenterServiceAccount, metav1.GetOptions{})
				return err
			},
			"rolebinding": func() error {
				_, err := cs.RbacV1().RoleBindings(ns).Get(ctx, KarpenterServiceAccount, metav1.GetOptions{})
				return err
			},
			"secret": func() error {
				_, err := cs.CoreV1().Secrets(ns).Get(ctx, SecretKarpenterKubeconfig, metav1.GetOptions{})
				return err
			},
		} {
			if err := get(); !apierrors.IsNotFound(err) {
				t.Errorf("the autoscaler's %s after disabling it: %v, want NotFound", what, err)
			}
		}
		after := resourceVersions(t, ctx, cs, "auto")
		for k := range before {
			if _, kept := after[k]; kept == strings.Contains(k, "karpenter") {
				t.Errorf("%s kept = %v after disabling the autoscaler", k, kept)
			}
		}
		if status, err := rt.Status(ctx, "auto"); err != nil {
			t.Fatal(err)
		} else if _, ok := status[api.ComponentKarpenter]; ok || !sameSet(slices.Collect(maps.Keys(status)), Components()) {
			t.Errorf("Status after disabling the autoscaler has %v", slices.Collect(maps.Keys(status)))
		}
	})

	t.Run("Delete_RemovesTheObjectsAndTerminatesTheNamespace", func(t *testing.T) {
		in, _ := testInputs(t, "gone", api.HighlyAvailable, "1.34.4")
		in = withKarpenter(in)
		if _, err := rt.Apply(ctx, in); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		p, err := rt.Delete(ctx, "gone")
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
		ns := Namespace("gone")
		// Without kube-controller-manager's namespace controller the namespace keeps its
		// "kubernetes" finalizer and stays Terminating: what is true here is that the
		// deletion started and that every object Delete removes itself is gone.
		obj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if !p.Gone {
				t.Error("namespace gone but Delete did not say so")
			}
		case err != nil:
			t.Fatal(err)
		default:
			if obj.DeletionTimestamp == nil || obj.Status.Phase != corev1.NamespaceTerminating {
				t.Errorf("namespace not terminating: deletionTimestamp %v phase %s", obj.DeletionTimestamp, obj.Status.Phase)
			}
			if p.Gone || !strings.Contains(p.Message, "terminating") {
				t.Errorf("Delete = %+v, want not gone with a message", p)
			}
			t.Logf("Delete progress: %s", p.Message)
		}
		if rv := resourceVersions(t, ctx, cs, "gone"); len(rv) != 0 {
			t.Errorf("objects left after Delete: %v", slices.Sorted(maps.Keys(rv)))
		}
		again, err := rt.Delete(ctx, "gone")
		if err != nil || again.Gone != p.Gone {
			t.Errorf("second Delete = %+v, %v", again, err)
		}
		if !p.Gone {
			if _, err := rt.Apply(ctx, in); !errors.Is(err, ErrNamespaceTerminating) {
				t.Errorf("Apply into a terminating namespace = %v, want ErrNamespaceTerminating", err)
			}
		}
		if none, err := rt.Delete(ctx, "never-applied"); err != nil || !none.Gone {
			t.Errorf("Delete of an unknown cluster = %+v, %v; want gone", none, err)
		}
	})
}

// ownerMeta returns a function naming an object of cluster's etcd with the owner labels.
func ownerMeta(cluster string) func(name string) metav1.ObjectMeta {
	return func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: labels(cluster, api.ComponentEtcd)}
	}
}

func checkOwnerLabels(t *testing.T, what string, m metav1.ObjectMeta, cluster string) {
	t.Helper()
	if m.Labels[LabelManagedBy] != ManagedBy || m.Labels[LabelCluster] != cluster || m.Labels[LabelComponent] == "" {
		t.Errorf("%s: labels %v lack the owner labels", what, m.Labels)
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// resourceVersions maps "kind/name" of every object of cluster's namespace this package
// manages to its resourceVersion.
func resourceVersions(t *testing.T, ctx context.Context, cs kubernetes.Interface, cluster string) map[string]string {
	t.Helper()
	ns, opts := Namespace(cluster), ownedBy(cluster)
	out := map[string]string{}
	add := func(kind string, items []metav1.Object) {
		for _, o := range items {
			out[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("secret", ptrs(secrets.Items))
	svcs, err := cs.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("service", ptrs(svcs.Items))
	sts, err := cs.AppsV1().StatefulSets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("statefulset", ptrs(sts.Items))
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("deployment", ptrs(deps.Items))
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("pdb", ptrs(pdbs.Items))
	sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("serviceaccount", ptrs(sas.Items))
	rbs, err := cs.RbacV1().RoleBindings(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	add("rolebinding", ptrs(rbs.Items))
	return out
}

func ptrs[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
