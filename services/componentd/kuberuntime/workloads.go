package kuberuntime

import (
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
)

// workload is one component's pod, before it becomes a template.
type workload struct {
	component, image, command string
	args                      []string
	env                       []*corev1ac.EnvVarApplyConfiguration
	ports                     []*corev1ac.ContainerPortApplyConfiguration
	secrets                   []string // mounted at secretDir, in this order
	scratch                   []scratchDir
	requests                  corev1.ResourceList
	startup, readiness        *corev1ac.ProbeApplyConfiguration
	liveness                  *corev1ac.ProbeApplyConfiguration
	gracePeriod               int64
	// serviceAccount, when set, is the pod's ServiceAccount, its token mounted (the
	// autoscaler's identity in the management cluster); other pods get no token.
	serviceAccount string
	// recreate replaces the pod by stopping the old one first (a single replica that must
	// never run twice); the others roll one new replica at a time.
	recreate bool
}

type scratchDir struct{ name, path string }

const (
	etcdDataVolume = "data"
	etcdDataDir    = "/var/lib/etcd"
)

func (in *Inputs) workloads() []workload {
	w := []workload{in.etcd(), in.withAudit(in.kubeAPIServer()), in.kubeControllerManager(), in.kubeScheduler()}
	for i := range w {
		w[i] = in.withTuning(w[i])
	}
	if in.Karpenter.Enabled {
		w = append(w, in.karpenter())
	}
	return w
}

// withTuning adds the release catalogue's settings of w's component: their flags join (or
// replace) w's own, their environment joins w's.
func (in *Inputs) withTuning(w workload) workload {
	settings := in.Release.Tuning(w.component, in.Policy, in.Tuning)
	w.args = release.ApplyArgs(w.args, settings)
	for _, e := range release.Env(settings) {
		name, value, _ := strings.Cut(e, "=")
		w.env = append(w.env, corev1ac.EnvVar().WithName(name).WithValue(value))
	}
	return w
}

func envFromField(name, path string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).
		WithValueFrom(corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath(path)))
}

func containerPort(name string, port int32) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName(name).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)
}

// startupProbe checks path every second for up to five minutes: the kubelet runs no readiness
// probe before it passes, so its period is how late a component that serves is seen started
// (with 5–10 s periods, a new control plane's chain etcd → kube-apiserver → the controllers
// waited out up to three of them).
func startupProbe(scheme corev1.URIScheme, path string, port int32) *corev1ac.ProbeApplyConfiguration {
	return httpProbe(scheme, path, port, 1, 300)
}

// readinessProbe checks path every 2 s; three failures in a row take the pod out of its
// Service.
func readinessProbe(scheme corev1.URIScheme, path string, port int32) *corev1ac.ProbeApplyConfiguration {
	return httpProbe(scheme, path, port, 2, 3)
}

// httpProbe GETs path on port; scheme HTTPS skips certificate verification (kubelet's way).
func httpProbe(scheme corev1.URIScheme, path string, port int32, period, failures int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithScheme(scheme).WithPath(path).WithPort(intstr.FromInt32(port))).
		WithPeriodSeconds(period).
		WithTimeoutSeconds(5).
		WithFailureThreshold(failures)
}

func etcdURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// etcd mirrors the process runtime's flags: mutual TLS between members and with clients.
// Each member advertises its stable DNS name under the headless Service.
func (in *Inputs) etcd() workload {
	hosts := EtcdMemberHosts(in.Cluster, in.Policy)
	initial := make([]string, len(hosts))
	for i, h := range hosts {
		initial[i] = etcdMemberName(i) + "=" + etcdURL(h, EtcdPeerPort)
	}
	self := "$(POD_NAME)." + api.EtcdDiscoveryHost(in.Cluster)
	return workload{
		component: api.ComponentEtcd,
		image:     in.EtcdImage,
		command:   "etcd",
		args: []string{
			"--name=$(POD_NAME)",
			"--data-dir=" + etcdDataDir + "/data",
			"--listen-client-urls=" + etcdURL("0.0.0.0", EtcdClientPort),
			"--advertise-client-urls=" + etcdURL(self, EtcdClientPort),
			"--listen-peer-urls=" + etcdURL("0.0.0.0", EtcdPeerPort),
			"--initial-advertise-peer-urls=" + etcdURL(self, EtcdPeerPort),
			"--listen-metrics-urls=http://" + net.JoinHostPort("0.0.0.0", strconv.Itoa(EtcdMetricsPort)),
			"--initial-cluster=" + strings.Join(initial, ","),
			// Ignored once the data dir holds a member: a restart rejoins the same cluster.
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + in.Cluster,
			"--cert-file=" + secretFile(SecretEtcdServer, corev1.TLSCertKey),
			"--key-file=" + secretFile(SecretEtcdServer, corev1.TLSPrivateKeyKey),
			"--trusted-ca-file=" + secretFile(SecretEtcdServer, KeyCA),
			"--client-cert-auth=true",
			"--peer-cert-file=" + secretFile(SecretEtcdPeer, corev1.TLSCertKey),
			"--peer-key-file=" + secretFile(SecretEtcdPeer, corev1.TLSPrivateKeyKey),
			"--peer-trusted-ca-file=" + secretFile(SecretEtcdPeer, KeyCA),
			"--peer-client-cert-auth=true",
			"--snapshot-count=10000",
		},
		env:     []*corev1ac.EnvVarApplyConfiguration{envFromField("POD_NAME", "metadata.name")},
		ports:   []*corev1ac.ContainerPortApplyConfiguration{containerPort("client", EtcdClientPort), containerPort("peer", EtcdPeerPort), containerPort("metrics", EtcdMetricsPort)},
		secrets: []string{SecretEtcdServer, SecretEtcdPeer},
		scratch: []scratchDir{{"tmp", "/tmp"}},
		// The metrics listener answers /livez and /readyz over plain HTTP (etcd ≥ 3.5.11).
		startup:     startupProbe(corev1.URISchemeHTTP, "/readyz", EtcdMetricsPort),
		readiness:   readinessProbe(corev1.URISchemeHTTP, "/readyz", EtcdMetricsPort),
		liveness:    httpProbe(corev1.URISchemeHTTP, "/livez", EtcdMetricsPort, 10, 8),
		requests:    quantities("100m", "128Mi"),
		gracePeriod: 30,
	}
}

// How a kube-apiserver pod stops, as the process runtime's HighlyAvailable replicas do
// (internal/component; here a single replica too, which a rolling update also replaces behind
// the Service): after SIGTERM it fails /readyz but keeps serving for apiServerShutdownDelay
// (--shutdown-delay-duration), while its endpoint leaves the Service's ready endpoints and the
// cluster DNS stops naming it, so clients reconnect elsewhere; then it stops listening,
// drains its requests, closes its watches after a second (kube.WatchTerminationGraceArg) and exits (without
// that flag it waited for the watches, which never end by themselves, until it was killed at
// apiServerGracePeriod). How long the old pod takes to go is what every replaced pod costs a
// rolling update: under HighlyAvailable the replacement cannot be scheduled anywhere until
// the old pod is gone (required anti-affinity, 3 nodes, 2 replicas and a surge pod), and with
// the default 60 s grace each replica of an upgrade or a certificate renewal waited a minute.
const (
	apiServerShutdownDelay = 3 * time.Second
	apiServerGracePeriod   = 10 // seconds: the delay, then the drain
)

// kubeAPIServer mirrors the process runtime's flags: etcd client certificates, the
// service-account key pair, the front proxy (requestheader) and Node,RBAC.
func (in *Inputs) kubeAPIServer() workload {
	hosts := EtcdMemberHosts(in.Cluster, in.Policy)
	servers := make([]string, len(hosts))
	for i, h := range hosts {
		servers[i] = etcdURL(h, EtcdClientPort)
	}
	w := workload{
		component: api.ComponentKubeAPIServer,
		image:     in.Release.Images[api.ComponentKubeAPIServer],
		command:   "kube-apiserver",
		args: []string{
			"--etcd-servers=" + strings.Join(servers, ","),
			"--etcd-cafile=" + secretFile(SecretEtcdClient, KeyCA),
			"--etcd-certfile=" + secretFile(SecretEtcdClient, corev1.TLSCertKey),
			"--etcd-keyfile=" + secretFile(SecretEtcdClient, corev1.TLSPrivateKeyKey),
			"--bind-address=0.0.0.0",
			"--secure-port=" + strconv.Itoa(APIServerPort),
			"--advertise-address=$(POD_IP)",
			// Pod IPs mean nothing to the guest cluster's nodes: leave its "kubernetes"
			// Endpoints alone, as the process runtime does.
			"--endpoint-reconciler-type=none",
			"--tls-cert-file=" + secretFile(SecretAPIServer, corev1.TLSCertKey),
			"--tls-private-key-file=" + secretFile(SecretAPIServer, corev1.TLSPrivateKeyKey),
			"--client-ca-file=" + secretFile(SecretAPIServer, KeyClientCA),
			"--kubelet-client-certificate=" + secretFile(SecretAPIServerKubeletClient, corev1.TLSCertKey),
			"--kubelet-client-key=" + secretFile(SecretAPIServerKubeletClient, corev1.TLSPrivateKeyKey),
			"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
			"--requestheader-client-ca-file=" + secretFile(SecretFrontProxyClient, KeyCA),
			"--proxy-client-cert-file=" + secretFile(SecretFrontProxyClient, corev1.TLSCertKey),
			"--proxy-client-key-file=" + secretFile(SecretFrontProxyClient, corev1.TLSPrivateKeyKey),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--service-account-key-file=" + secretFile(SecretServiceAccount, KeyServiceAccountPub),
			"--service-account-signing-key-file=" + secretFile(SecretServiceAccount, KeyServiceAccountKey),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-cluster-ip-range=" + in.ServiceCIDR,
			"--authorization-mode=Node,RBAC",
			"--enable-bootstrap-token-auth=true",
			"--allow-privileged=true",
			"--profiling=false",
			"--cert-dir=/var/run/kubernetes",
			"--shutdown-delay-duration=" + apiServerShutdownDelay.String(),
			kube.WatchTerminationGraceArg,
		},
		env:   []*corev1ac.EnvVarApplyConfiguration{envFromField("POD_IP", "status.podIP")},
		ports: []*corev1ac.ContainerPortApplyConfiguration{containerPort("https", APIServerPort)},
		secrets: []string{SecretEtcdClient, SecretAPIServer, SecretAPIServerKubeletClient,
			SecretFrontProxyClient, SecretServiceAccount},
		scratch:     []scratchDir{{"cert-dir", "/var/run/kubernetes"}, {"tmp", "/tmp"}},
		startup:     startupProbe(corev1.URISchemeHTTPS, "/livez", APIServerPort),
		readiness:   readinessProbe(corev1.URISchemeHTTPS, "/readyz", APIServerPort),
		liveness:    httpProbe(corev1.URISchemeHTTPS, "/livez", APIServerPort, 10, 6),
		requests:    quantities("250m", "384Mi"),
		gracePeriod: apiServerGracePeriod,
	}
	if e := in.PKI.SecretEncryption; e != nil && len(e.Keys) > 0 {
		// Secrets encrypted at rest in etcd (spec.secretEncryption); the Secret is rendered
		// from the same keys (secrets.go).
		w.args = append(w.args, "--encryption-provider-config="+secretFile(SecretEncryptionConfig, KeyEncryptionConfig))
		w.secrets = append(w.secrets, SecretEncryptionConfig)
	}
	return w
}

// kubeControllerManager mirrors the process runtime's flags (the kubelet signer, the
// bootstrap token controllers). Leader election is always on: a rolling update runs the
// old and the new pod side by side.
func (in *Inputs) kubeControllerManager() workload {
	kubeconfig := secretFile(SecretControllerManagerKubeconfig, KeyKubeconfig)
	return workload{
		component: api.ComponentControllerManager,
		image:     in.Release.Images[api.ComponentControllerManager],
		command:   "kube-controller-manager",
		args: []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			// Started beside kube-apiserver, it can ask for the extension-apiserver-authentication
			// ConfigMap before kube-apiserver's bootstrap RBAC is in place; forbidden is fatal by
			// default, and the kubelet's crash-loop back-off then held the restart for 17–20 s
			// of a 22–27 s create (BENCHMARKS.md). Tolerated, as kube-scheduler's default is: the
			// secure port then knows no client CA, and serves /healthz (always allowed) and
			// token-authenticated requests as before.
			"--authentication-tolerate-lookup-failure=true",
			"--authorization-kubeconfig=" + kubeconfig,
			"--cluster-signing-cert-file=" + secretFile(SecretKubeletSigner, corev1.TLSCertKey),
			"--cluster-signing-key-file=" + secretFile(SecretKubeletSigner, corev1.TLSPrivateKeyKey),
			"--root-ca-file=" + secretFile(SecretRootCA, KeyCA),
			"--service-account-private-key-file=" + secretFile(SecretServiceAccount, KeyServiceAccountKey),
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + in.ServiceCIDR,
			"--cluster-cidr=" + in.PodCIDR,
			"--allocate-node-cidrs=true",
			"--node-cidr-mask-size=" + strconv.Itoa(api.Networking{PodCIDR: in.PodCIDR}.NodeCIDRMaskSize()),
			"--bind-address=0.0.0.0",
			"--secure-port=" + strconv.Itoa(ControllerManagerPort),
			"--leader-elect=true",
			"--cluster-name=" + in.Cluster,
			"--profiling=false",
		},
		ports:       []*corev1ac.ContainerPortApplyConfiguration{containerPort("https", ControllerManagerPort)},
		secrets:     []string{SecretControllerManagerKubeconfig, SecretKubeletSigner, SecretRootCA, SecretServiceAccount},
		scratch:     []scratchDir{{"tmp", "/tmp"}},
		startup:     startupProbe(corev1.URISchemeHTTPS, "/healthz", ControllerManagerPort),
		readiness:   readinessProbe(corev1.URISchemeHTTPS, "/healthz", ControllerManagerPort),
		liveness:    httpProbe(corev1.URISchemeHTTPS, "/healthz", ControllerManagerPort, 10, 6),
		requests:    quantities("100m", "160Mi"),
		gracePeriod: 30,
	}
}

func (in *Inputs) kubeScheduler() workload {
	kubeconfig := secretFile(SecretSchedulerKubeconfig, KeyKubeconfig)
	return workload{
		component: api.ComponentScheduler,
		image:     in.Release.Images[api.ComponentScheduler],
		command:   "kube-scheduler",
		args: []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=0.0.0.0",
			"--secure-port=" + strconv.Itoa(SchedulerPort),
			"--leader-elect=true",
			"--profiling=false",
		},
		ports:       []*corev1ac.ContainerPortApplyConfiguration{containerPort("https", SchedulerPort)},
		secrets:     []string{SecretSchedulerKubeconfig},
		scratch:     []scratchDir{{"tmp", "/tmp"}},
		startup:     startupProbe(corev1.URISchemeHTTPS, "/healthz", SchedulerPort),
		readiness:   readinessProbe(corev1.URISchemeHTTPS, "/healthz", SchedulerPort),
		liveness:    httpProbe(corev1.URISchemeHTTPS, "/healthz", SchedulerPort, 10, 6),
		requests:    quantities("50m", "96Mi"),
		gracePeriod: 30,
	}
}
