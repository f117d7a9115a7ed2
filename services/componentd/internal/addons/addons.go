// Package addons is the guest side of a control plane whose nodes are real (platform none):
// what a kubeadm cluster gets from its addons phase and its apiserver's endpoint reconciler,
// applied into the guest through its API with server-side apply.
//
//   - The "kubernetes" Service's endpoints: the cluster's endpoint (infra), so that pods'
//     in-cluster configuration (KUBERNETES_SERVICE_HOST, kubernetes.default.svc) reaches the
//     hosted kube-apiserver through kube-proxy. The control plane runs with
//     --endpoint-reconciler-type=none (its own addresses mean nothing to the nodes), so these
//     are written here: an EndpointSlice and, for older readers, an Endpoints object.
//   - CoreDNS in kube-system: its ServiceAccount and Kubernetes' system:coredns role, the
//     Corefile, a Deployment of two replicas spread over nodes, and the kube-dns Service at
//     the service CIDR's tenth address, which ignitiond writes into every real node's
//     KubeletConfiguration (clusterDNS).
//   - The pod network: hostplane-netd (cmd/hostplane/internal/guestimages/netd), a
//     DaemonSet on every node that writes the CNI configuration of the node's pod range
//     (kube-controller-manager allocates them), routes the other nodes' ranges through
//     their addresses and masquerades what leaves the pod network.
//
// On the simulated local platform none of this is applied: its nodes run no container, and
// pods that never run would only hold capacity the autoscalers size for.
package addons

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
)

// Names of what the addons apply.
const (
	// FieldManager applies every object.
	FieldManager = "hostplane-componentd"
	// ManagedBy is the EndpointSlice controller name of the kubernetes Service's slice.
	ManagedBy = "componentd.hostplane.dev"
	// DNSName names CoreDNS's ServiceAccount, ConfigMap and Deployment; DNSService is the
	// Service every kubelet's clusterDNS names (kubeadm's names).
	DNSName    = "coredns"
	DNSService = "kube-dns"
	// DNSRole is Kubernetes' ClusterRole name for CoreDNS (kubeadm's).
	DNSRole        = "system:coredns"
	kubeSystem     = "kube-system"
	dnsAppLabel    = "k8s-app"
	dnsAppValue    = "kube-dns"
	kubernetesName = "kubernetes"
	corefileKey    = "Corefile"
	// dnsReplicas: two, as kubeadm runs, so that one node's loss or a rollout keeps DNS.
	dnsReplicas = 2
	// NetName names the pod network's ServiceAccount and DaemonSet; NetRole its ClusterRole.
	NetName     = "hostplane-netd"
	NetRole     = "hostplane:netd"
	netAppValue = "hostplane-netd"
)

// Config is what a cluster's addons are made of.
type Config struct {
	// APIServer is the address the nodes reach the cluster's kube-apiserver at (the infra
	// endpoint): the kubernetes Service's endpoint. It must be an IP address.
	APIServer netip.AddrPort
	// DNSIP is the kube-dns Service's cluster IP; DNSImage the CoreDNS image.
	DNSIP    netip.Addr
	DNSImage string
	// ClusterDomain is the domain CoreDNS answers for Services (cluster.local).
	ClusterDomain string
	// PodCIDR is the cluster's pod network; NetImage the image of hostplane-netd.
	PodCIDR  netip.Prefix
	NetImage string
}

// Hash identifies c: the objects applied for it are the same as long as it is.
func (c Config) Hash() string {
	b, _ := json.Marshal([]string{c.APIServer.String(), c.DNSIP.String(), c.DNSImage, c.ClusterDomain, corefile(c.ClusterDomain),
		c.PodCIDR.String(), c.NetImage})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Validate says what c lacks.
func (c Config) Validate() error {
	switch {
	case !c.APIServer.IsValid() || c.APIServer.Port() == 0:
		return fmt.Errorf("the cluster's endpoint %v is not an IP address and port", c.APIServer)
	case !c.DNSIP.IsValid():
		return fmt.Errorf("no DNS Service address")
	case c.DNSImage == "":
		return fmt.Errorf("no CoreDNS image")
	case c.ClusterDomain == "":
		return fmt.Errorf("no cluster domain")
	case !c.PodCIDR.IsValid():
		return fmt.Errorf("no pod network")
	case c.NetImage == "":
		return fmt.Errorf("no pod network image (componentd --netd-image, which hostplane dev sets to the image it pushes)")
	}
	return nil
}

// corefile is CoreDNS's configuration: kubeadm's, answering for Services and pods of
// domain, forwarding every other name to the node's resolvers.
func corefile(domain string) string {
	return `.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes ` + domain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    cache 30 {
        disable success ` + domain + `
        disable denial ` + domain + `
    }
    loop
    reload
    loadbalance
}
`
}

// Apply applies c's objects into the guest cs talks to, each with server-side apply (so a
// second Apply changes nothing, and one after a change of c updates what changed).
func Apply(ctx context.Context, cs kubernetes.Interface, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if err := applyAPIServerEndpoints(ctx, cs, c, opts); err != nil {
		return err
	}
	// The pod network before DNS: CoreDNS's pods start only on a node whose network is set.
	if err := applyNetwork(ctx, cs, c, opts); err != nil {
		return err
	}
	return applyDNS(ctx, cs, c, opts)
}

// applyAPIServerEndpoints points the kubernetes Service at c.APIServer.
func applyAPIServerEndpoints(ctx context.Context, cs kubernetes.Interface, c Config, opts metav1.ApplyOptions) error {
	addr, port := c.APIServer.Addr().Unmap(), int32(c.APIServer.Port())
	family := discoveryv1.AddressTypeIPv4
	if addr.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := discoveryv1ac.EndpointSlice(kubernetesName, metav1.NamespaceDefault).
		WithLabels(map[string]string{discoveryv1.LabelServiceName: kubernetesName, discoveryv1.LabelManagedBy: ManagedBy}).
		WithAddressType(family).
		WithEndpoints(discoveryv1ac.Endpoint().WithAddresses(addr.String()).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(true))).
		WithPorts(discoveryv1ac.EndpointPort().WithName("https").WithPort(port).WithProtocol(corev1.ProtocolTCP))
	if _, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Apply(ctx, slice, opts); err != nil {
		return fmt.Errorf("apply EndpointSlice default/%s: %w", kubernetesName, err)
	}
	// The Endpoints object, for readers of the old API; the EndpointSlice above is the one
	// kube-proxy reads, so the mirroring controller must leave this one alone.
	ep := corev1ac.Endpoints(kubernetesName, metav1.NamespaceDefault).
		WithLabels(map[string]string{discoveryv1.LabelSkipMirror: "true"}).
		WithSubsets(corev1ac.EndpointSubset().
			WithAddresses(corev1ac.EndpointAddress().WithIP(addr.String())).
			WithPorts(corev1ac.EndpointPort().WithName("https").WithPort(port).WithProtocol(corev1.ProtocolTCP)))
	if _, err := cs.CoreV1().Endpoints(metav1.NamespaceDefault).Apply(ctx, ep, opts); err != nil {
		return fmt.Errorf("apply Endpoints default/%s: %w", kubernetesName, err)
	}
	return nil
}

// applyIdentity applies ServiceAccount kube-system/account, ClusterRole role of rules and the
// binding of one to the other.
func applyIdentity(ctx context.Context, cs kubernetes.Interface, account, role string, opts metav1.ApplyOptions, rules ...*rbacv1ac.PolicyRuleApplyConfiguration) error {
	if _, err := cs.CoreV1().ServiceAccounts(kubeSystem).Apply(ctx, corev1ac.ServiceAccount(account, kubeSystem), opts); err != nil {
		return fmt.Errorf("apply ServiceAccount %s/%s: %w", kubeSystem, account, err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1ac.ClusterRole(role).WithRules(rules...), opts); err != nil {
		return fmt.Errorf("apply ClusterRole %s: %w", role, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, rbacv1ac.ClusterRoleBinding(role).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(role)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(account).WithNamespace(kubeSystem)), opts); err != nil {
		return fmt.Errorf("apply ClusterRoleBinding %s: %w", role, err)
	}
	return nil
}

// applyDNS applies CoreDNS: its identity and role, the Corefile, the Deployment and the
// kube-dns Service.
func applyDNS(ctx context.Context, cs kubernetes.Interface, c Config, opts metav1.ApplyOptions) error {
	labels := map[string]string{dnsAppLabel: dnsAppValue}
	read := []string{"list", "watch"}
	if err := applyIdentity(ctx, cs, DNSName, DNSRole, opts,
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("endpoints", "services", "pods", "namespaces").WithVerbs(read...),
		rbacv1ac.PolicyRule().WithAPIGroups(discoveryv1.GroupName).WithResources("endpointslices").WithVerbs(read...),
	); err != nil {
		return err
	}
	conf := corefile(c.ClusterDomain)
	if _, err := cs.CoreV1().ConfigMaps(kubeSystem).Apply(ctx, corev1ac.ConfigMap(DNSName, kubeSystem).
		WithData(map[string]string{corefileKey: conf}), opts); err != nil {
		return fmt.Errorf("apply ConfigMap %s/%s: %w", kubeSystem, DNSName, err)
	}
	if _, err := cs.AppsV1().Deployments(kubeSystem).Apply(ctx, dnsDeployment(c, labels, conf), opts); err != nil {
		return fmt.Errorf("apply Deployment %s/%s: %w", kubeSystem, DNSName, err)
	}
	svc := corev1ac.Service(DNSService, kubeSystem).
		WithLabels(map[string]string{dnsAppLabel: dnsAppValue, "kubernetes.io/name": "CoreDNS"}).
		WithSpec(corev1ac.ServiceSpec().WithSelector(labels).WithClusterIP(c.DNSIP.String()).WithPorts(
			corev1ac.ServicePort().WithName("dns").WithPort(53).WithProtocol(corev1.ProtocolUDP).WithTargetPort(intstr.FromInt32(53)),
			corev1ac.ServicePort().WithName("dns-tcp").WithPort(53).WithProtocol(corev1.ProtocolTCP).WithTargetPort(intstr.FromInt32(53)),
			corev1ac.ServicePort().WithName("metrics").WithPort(9153).WithProtocol(corev1.ProtocolTCP).WithTargetPort(intstr.FromInt32(9153)),
		))
	if _, err := cs.CoreV1().Services(kubeSystem).Apply(ctx, svc, opts); err != nil {
		return fmt.Errorf("apply Service %s/%s: %w", kubeSystem, DNSService, err)
	}
	return nil
}

// dnsDeployment is CoreDNS's Deployment: kubeadm's shape (critical priority, the node's
// resolvers upstream, readiness from the ready plugin, liveness from health), spread over
// nodes, restarted when the Corefile changes (its hash is a pod annotation).
func dnsDeployment(c Config, labels map[string]string, conf string) *appsv1ac.DeploymentApplyConfiguration {
	sum := sha256.Sum256([]byte(conf))
	port := func(name string, p int32, proto corev1.Protocol) *corev1ac.ContainerPortApplyConfiguration {
		return corev1ac.ContainerPort().WithName(name).WithContainerPort(p).WithProtocol(proto)
	}
	probe := func(path string, p int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromInt32(p)).WithScheme(corev1.URISchemeHTTP))
	}
	container := corev1ac.Container().WithName(DNSName).WithImage(c.DNSImage).WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs("-conf", "/etc/coredns/"+corefileKey).
		WithPorts(port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP), port("metrics", 9153, corev1.ProtocolTCP),
			port("liveness-probe", 8080, corev1.ProtocolTCP), port("readiness-probe", 8181, corev1.ProtocolTCP)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("config").WithMountPath("/etc/coredns").WithReadOnly(true)).
		WithLivenessProbe(probe("/health", 8080).WithInitialDelaySeconds(60).WithTimeoutSeconds(5).WithFailureThreshold(5)).
		WithReadinessProbe(probe("/ready", 8181)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")})).
		WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL").WithAdd("NET_BIND_SERVICE")))
	spread := corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(corev1ac.PodAffinityTerm().
		WithTopologyKey(corev1.LabelHostname).WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(labels)))
	return appsv1ac.Deployment(DNSName, kubeSystem).WithLabels(labels).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(dnsReplicas).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().WithMaxUnavailable(intstr.FromInt32(1)))).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
			WithAnnotations(map[string]string{"hostplane.dev/corefile": hex.EncodeToString(sum[:8])}).
			WithSpec(corev1ac.PodSpec().
				WithServiceAccountName(DNSName).
				WithPriorityClassName("system-cluster-critical").
				WithDNSPolicy(corev1.DNSDefault).
				WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}).
				WithTolerations(corev1ac.Toleration().WithKey("CriticalAddonsOnly").WithOperator(corev1.TolerationOpExists)).
				WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().
					WithPreferredDuringSchedulingIgnoredDuringExecution(spread))).
				WithContainers(container).
				WithVolumes(corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().
					WithName(DNSName).WithItems(corev1ac.KeyToPath().WithKey(corefileKey).WithPath(corefileKey)))))))
}

// applyNetwork applies hostplane-netd: its identity, a role that reads Nodes, and the
// DaemonSet.
func applyNetwork(ctx context.Context, cs kubernetes.Interface, c Config, opts metav1.ApplyOptions) error {
	if err := applyIdentity(ctx, cs, NetName, NetRole, opts,
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("get", "list", "watch"),
	); err != nil {
		return err
	}
	if _, err := cs.AppsV1().DaemonSets(kubeSystem).Apply(ctx, netDaemonSet(c), opts); err != nil {
		return fmt.Errorf("apply DaemonSet %s/%s: %w", kubeSystem, NetName, err)
	}
	return nil
}

// netDaemonSet runs hostplane-netd on every node, NotReady ones first of all (a node is not
// Ready until netd wrote its CNI configuration): in the node's network namespace with
// NET_ADMIN, tolerating every taint, at node-critical priority, writing the node's
// /etc/cni/net.d.
func netDaemonSet(c Config) *appsv1ac.DaemonSetApplyConfiguration {
	labels := map[string]string{dnsAppLabel: netAppValue}
	const confDir = "/etc/cni/net.d"
	container := corev1ac.Container().WithName("netd").WithImage(c.NetImage).WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs("--cluster-cidr="+c.PodCIDR.String(), "--cni-conf-dir="+confDir).
		WithEnv(corev1ac.EnvVar().WithName("NODE_NAME").WithValueFrom(corev1ac.EnvVarSource().
			WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("spec.nodeName")))).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("cni-conf").WithMountPath(confDir)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("20Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")})).
		WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL").WithAdd("NET_ADMIN")))
	return appsv1ac.DaemonSet(NetName, kubeSystem).WithLabels(labels).WithSpec(appsv1ac.DaemonSetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().WithType(appsv1.RollingUpdateDaemonSetStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDaemonSet().WithMaxUnavailable(intstr.FromInt32(1)))).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithServiceAccountName(NetName).
			WithPriorityClassName("system-node-critical").
			WithHostNetwork(true).
			WithDNSPolicy(corev1.DNSDefault).
			WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}).
			WithTolerations(corev1ac.Toleration().WithOperator(corev1.TolerationOpExists)).
			WithContainers(container).
			WithVolumes(corev1ac.Volume().WithName("cni-conf").WithHostPath(corev1ac.HostPathVolumeSource().
				WithPath(confDir).WithType(corev1.HostPathDirectoryOrCreate))))))
}
