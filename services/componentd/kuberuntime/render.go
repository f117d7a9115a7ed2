package kuberuntime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/hostplane/hostplane/pkg/api"
)

// Objects is one cluster's rendered control plane, each kind in a fixed order.
type Objects struct {
	Namespace            *corev1ac.NamespaceApplyConfiguration
	Secrets              []*corev1ac.SecretApplyConfiguration
	Services             []*corev1ac.ServiceApplyConfiguration
	ServiceAccounts      []*corev1ac.ServiceAccountApplyConfiguration
	RoleBindings         []*rbacv1ac.RoleBindingApplyConfiguration
	StatefulSets         []*appsv1ac.StatefulSetApplyConfiguration
	Deployments          []*appsv1ac.DeploymentApplyConfiguration
	PodDisruptionBudgets []*policyv1ac.PodDisruptionBudgetApplyConfiguration
	// ConfigHashes is each component's config hash (the pod templates' AnnotationConfigHash).
	ConfigHashes map[string]string
}

// Render returns the objects that run in's control plane. It is deterministic: the same
// inputs give the same objects.
func Render(in Inputs) (*Objects, error) {
	in, err := in.withDefaults()
	if err != nil {
		return nil, err
	}
	secrets, err := in.secrets()
	if err != nil {
		return nil, err
	}
	data := make(map[string]map[string][]byte, len(secrets))
	ns := Namespace(in.Cluster)
	o := &Objects{
		Namespace:    corev1ac.Namespace(ns).WithLabels(labels(in.Cluster, ComponentShared)),
		ConfigHashes: map[string]string{},
	}
	for _, s := range secrets {
		data[s.name] = s.data
		o.Secrets = append(o.Secrets, corev1ac.Secret(s.name, ns).
			WithLabels(labels(in.Cluster, s.component)).
			WithType(s.typ).
			WithData(s.data))
	}

	o.Services = append(o.Services,
		corev1ac.Service(EtcdDiscoveryService, ns).
			WithLabels(labels(in.Cluster, api.ComponentEtcd)).
			WithSpec(corev1ac.ServiceSpec().
				WithClusterIP(corev1.ClusterIPNone).
				// Members find their peers before any of them is ready.
				WithPublishNotReadyAddresses(true).
				WithSelector(selector(in.Cluster, api.ComponentEtcd)).
				WithPorts(servicePort("client", EtcdClientPort), servicePort("peer", EtcdPeerPort))),
		corev1ac.Service(APIServerService, ns).
			WithLabels(labels(in.Cluster, api.ComponentKubeAPIServer)).
			WithSpec(corev1ac.ServiceSpec().
				WithType(corev1.ServiceTypeClusterIP).
				WithSelector(selector(in.Cluster, api.ComponentKubeAPIServer)).
				WithPorts(servicePort("https", APIServerPort))),
	)

	if in.Karpenter.Enabled {
		sa, binding := karpenterIdentity(in.Cluster)
		o.ServiceAccounts = append(o.ServiceAccounts, sa)
		o.RoleBindings = append(o.RoleBindings, binding)
	}

	for _, w := range in.workloads() {
		tmpl, hash, err := podTemplate(in, w, data)
		if err != nil {
			return nil, err
		}
		o.ConfigHashes[w.component] = hash
		replicas := int32(Replicas(w.component, in.Policy))
		run := replicas
		if slices.Contains(in.Held, w.component) {
			run = 0
		}
		if w.component == api.ComponentEtcd {
			o.StatefulSets = append(o.StatefulSets, etcdStatefulSet(in, run, tmpl))
		} else {
			o.Deployments = append(o.Deployments, appsv1ac.Deployment(w.component, ns).
				WithLabels(labels(in.Cluster, w.component)).
				WithSpec(appsv1ac.DeploymentSpec().
					WithReplicas(run).
					WithRevisionHistoryLimit(3).
					WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(in.Cluster, w.component))).
					WithStrategy(deploymentStrategy(w)).
					WithTemplate(tmpl)))
		}
		if in.Policy == api.HighlyAvailable && replicas > 1 {
			o.PodDisruptionBudgets = append(o.PodDisruptionBudgets, policyv1ac.PodDisruptionBudget(w.component, ns).
				WithLabels(labels(in.Cluster, w.component)).
				WithSpec(policyv1ac.PodDisruptionBudgetSpec().
					WithMaxUnavailable(intstr.FromInt32(1)).
					WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(in.Cluster, w.component)))))
		}
	}
	return o, nil
}

// deploymentStrategy is Recreate for a workload that must never run twice, else one new
// replica at a time, none taken down before its successor is ready: the API stays up
// through a rollout even with one replica.
func deploymentStrategy(w workload) *appsv1ac.DeploymentStrategyApplyConfiguration {
	if w.recreate {
		return appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)
	}
	return appsv1ac.DeploymentStrategy().
		WithType(appsv1.RollingUpdateDeploymentStrategyType).
		WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
			WithMaxSurge(intstr.FromInt32(1)).
			WithMaxUnavailable(intstr.FromInt32(0)))
}

func etcdStatefulSet(in Inputs, replicas int32, tmpl *corev1ac.PodTemplateSpecApplyConfiguration) *appsv1ac.StatefulSetApplyConfiguration {
	pvc := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: in.EtcdStorage}))
	if in.EtcdStorageClass != "" {
		pvc.WithStorageClassName(in.EtcdStorageClass)
	}
	return appsv1ac.StatefulSet(api.ComponentEtcd, Namespace(in.Cluster)).
		WithLabels(labels(in.Cluster, api.ComponentEtcd)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).
			WithServiceName(EtcdDiscoveryService).
			// Every member starts at once: one alone never becomes ready without a quorum.
			WithPodManagementPolicy("Parallel").
			WithRevisionHistoryLimit(3).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(in.Cluster, api.ComponentEtcd))).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType("RollingUpdate")).
			WithTemplate(tmpl).
			WithVolumeClaimTemplates(corev1ac.PersistentVolumeClaim(etcdDataVolume, "").
				WithLabels(labels(in.Cluster, api.ComponentEtcd)).
				WithSpec(pvc)))
}

// labels are the owner labels every object carries.
func labels(cluster, component string) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelCluster:   cluster,
		LabelComponent: component,
	}
}

// selector selects component's pods.
func selector(cluster, component string) map[string]string {
	return map[string]string{LabelCluster: cluster, LabelComponent: component}
}

func servicePort(name string, port int32) *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().WithName(name).WithProtocol(corev1.ProtocolTCP).
		WithPort(port).WithTargetPort(intstr.FromInt32(port))
}

// Pod identity: a fixed unprivileged user ("nonroot" of the distroless images), so
// runAsNonRoot holds for images whose USER is root or unset.
const (
	podUser  = 65532
	podGroup = 65532
)

// podTemplate renders w's pod template and its config hash: a digest of the template and
// of the data of every Secret it mounts.
func podTemplate(in Inputs, w workload, secrets map[string]map[string][]byte) (*corev1ac.PodTemplateSpecApplyConfiguration, string, error) {
	c := corev1ac.Container().
		WithName(w.component).
		WithImage(w.image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(w.command).
		WithArgs(w.args...).
		WithEnv(w.env...).
		WithPorts(w.ports...).
		WithResources(corev1ac.ResourceRequirements().WithRequests(w.requests)).
		WithStartupProbe(w.startup).
		WithReadinessProbe(w.readiness).
		WithLivenessProbe(w.liveness).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	var volumes []*corev1ac.VolumeApplyConfiguration
	for _, s := range w.secrets {
		if _, ok := secrets[s]; !ok {
			return nil, "", fmt.Errorf("%s mounts unknown secret %q", w.component, s) // a bug
		}
		volumes = append(volumes, corev1ac.Volume().WithName(s).
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(s).WithDefaultMode(0o440)))
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(s).WithMountPath(secretDir(s)).WithReadOnly(true))
	}
	for _, d := range w.scratch {
		volumes = append(volumes, corev1ac.Volume().WithName(d.name).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(d.name).WithMountPath(d.path))
	}
	if w.component == api.ComponentEtcd {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(etcdDataVolume).WithMountPath(etcdDataDir))
	}

	sel := selector(in.Cluster, w.component)
	podSpec := corev1ac.PodSpec()
	if w.serviceAccount != "" {
		podSpec.WithServiceAccountName(w.serviceAccount)
	}
	tmpl := corev1ac.PodTemplateSpec().
		WithLabels(labels(in.Cluster, w.component)).
		WithSpec(podSpec.
			WithContainers(c).
			WithVolumes(volumes...).
			WithAutomountServiceAccountToken(w.serviceAccount != "").
			WithEnableServiceLinks(false).
			WithTerminationGracePeriodSeconds(w.gracePeriod).
			WithSecurityContext(corev1ac.PodSecurityContext().
				WithRunAsNonRoot(true).
				WithRunAsUser(podUser).
				WithRunAsGroup(podGroup).
				WithFSGroup(podGroup).
				WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
			WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(antiAffinity(in, w.component, sel))))

	h := sha256.New()
	spec, err := json.Marshal(tmpl)
	if err != nil {
		return nil, "", fmt.Errorf("hash the %s pod template: %w", w.component, err)
	}
	h.Write(spec)
	for _, s := range w.secrets { // w.secrets has a fixed order
		d := secrets[s]
		fmt.Fprintf(h, "\x00secret %s", s)
		for _, k := range slices.Sorted(maps.Keys(d)) {
			fmt.Fprintf(h, "\x00%s\x00%d\x00", k, len(d[k]))
			h.Write(d[k])
		}
	}
	hash := hex.EncodeToString(h.Sum(nil))[:32]
	tmpl.WithAnnotations(map[string]string{AnnotationConfigHash: hash})
	return tmpl, hash, nil
}

// antiAffinity keeps a component's replicas on different management nodes. Under
// HighlyAvailable it is required: a node holding two of etcd's three members would take the
// quorum with it, and one holding both kube-apiservers the API, so a replica that finds no
// free node stays Pending rather than share one. HighlyAvailable therefore needs at least 3
// schedulable management nodes (etcd's members; also one more than the 2 replicas of the
// Deployments, for a rolling update's surge pod). A single replica (and the autoscaler) only
// prefers another node, so a rollout's surge pod may run beside the old one.
func antiAffinity(in Inputs, component string, sel map[string]string) *corev1ac.PodAntiAffinityApplyConfiguration {
	term := corev1ac.PodAffinityTerm().
		WithTopologyKey(corev1.LabelHostname).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(sel))
	if in.Policy == api.HighlyAvailable && Replicas(component, in.Policy) > 1 {
		return corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term)
	}
	return corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
		corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(term))
}

// secretDir is where a Secret is mounted; secretFile one of its keys.
func secretDir(secret string) string       { return "/etc/hostplane/" + secret }
func secretFile(secret, key string) string { return secretDir(secret) + "/" + key }

func quantities(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
}
