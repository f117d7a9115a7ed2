package component

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/services/componentd/internal/audit"
)

func kubeAPIServer() *Component {
	return &Component{
		Name:         api.ComponentKubeAPIServer,
		DependsOn:    []string{api.ComponentEtcd},
		ReleaseBound: true,
		LoadBalanced: true,
		Uses: []string{
			CertFile(api.CertEtcdCA),
			CertFile(api.CertAPIServerEtcdClient), KeyFile(api.CertAPIServerEtcdClient),
			CertFile(api.CertAPIServer), KeyFile(api.CertAPIServer),
			FileClientCA,
			CertFile(api.CertAPIServerKubelet), KeyFile(api.CertAPIServerKubelet),
			CertFile(api.CertFrontProxyCA),
			CertFile(api.CertFrontProxyClient), KeyFile(api.CertFrontProxyClient),
			FileSAPublic, FileSAPrivate,
			FileAuditPolicy,
		},
		MayUse: []string{FileEncryptionConfig},
		single: 1, ha: 2,
		// After SIGTERM kube-apiserver fails /readyz and (HighlyAvailable) keeps serving for
		// ShutdownDelay while infrad's load balancer drains it, then stops listening and
		// exits once its requests are done and its watches closed (kube.WatchTerminationGraceArg);
		// this bounds the rest.
		StopTimeout: ShutdownDelay + 5*time.Second,
		args:        apiServerArgs,
		probe:       apiServerProbe,
	}
}

// apiServerEndpoint is where replica n listens.
func apiServerEndpoint(in *Inputs, n int) (api.Endpoint, error) {
	if len(in.Infra.APIServers) <= n || in.Infra.APIServers[n].Port <= 0 {
		return api.Endpoint{}, fmt.Errorf("%w: no kube-apiserver port for replica %d", ErrIncompleteInfra, n)
	}
	ep := in.Infra.APIServers[n]
	if ep.Host == "" {
		ep.Host = loopback
	}
	return ep, nil
}

// APIServerCertDir is replica n's --cert-dir, relative to the cluster's directory.
func APIServerCertDir(n int) string { return "kube-apiserver-" + strconv.Itoa(n) }

func apiServerArgs(in *Inputs, n int) ([]string, error) {
	ep, err := apiServerEndpoint(in, n)
	if err != nil {
		return nil, err
	}
	members, err := etcdMembers(in)
	if err != nil {
		return nil, err
	}
	etcdURLs := make([]string, len(members))
	for i, m := range members {
		etcdURLs[i] = etcdClientURL(m)
	}
	args := []string{
		"--etcd-servers=" + strings.Join(etcdURLs, ","),
		"--etcd-cafile=" + in.path(CertFile(api.CertEtcdCA)),
		"--etcd-certfile=" + in.path(CertFile(api.CertAPIServerEtcdClient)),
		"--etcd-keyfile=" + in.path(KeyFile(api.CertAPIServerEtcdClient)),
		"--bind-address=" + ep.Host,
		"--secure-port=" + strconv.Itoa(ep.Port),
		// A loopback advertise address keeps the "kubernetes" Endpoints from being written
		// and the lease reconciler from settling (ARCHITECTURE §11).
		"--advertise-address=" + loopback,
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + in.path(CertFile(api.CertAPIServer)),
		"--tls-private-key-file=" + in.path(KeyFile(api.CertAPIServer)),
		"--client-ca-file=" + in.path(FileClientCA),
		"--kubelet-client-certificate=" + in.path(CertFile(api.CertAPIServerKubelet)),
		"--kubelet-client-key=" + in.path(KeyFile(api.CertAPIServerKubelet)),
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname", // a real node's name need not resolve here
		"--requestheader-client-ca-file=" + in.path(CertFile(api.CertFrontProxyCA)),
		"--proxy-client-cert-file=" + in.path(CertFile(api.CertFrontProxyClient)),
		"--proxy-client-key-file=" + in.path(KeyFile(api.CertFrontProxyClient)),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--service-account-key-file=" + in.path(FileSAPublic),
		"--service-account-signing-key-file=" + in.path(FileSAPrivate),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + in.serviceCIDR(),
		"--authorization-mode=Node,RBAC",
		"--enable-bootstrap-token-auth=true",
		"--allow-privileged=true",
		"--profiling=false",
		// Exit soon after SIGTERM although clients hold watches open: a stop no longer
		// waits out StopTimeout and a kill (kube.WatchTerminationGraceArg).
		kube.WatchTerminationGraceArg,
		// Without it kube-apiserver defaults to /var/run/kubernetes, which it may not own.
		"--cert-dir=" + filepath.Join(in.Dir, APIServerCertDir(n)),
	}
	args = append(args, auditArgs(in, n)...)
	if _, ok := in.Files[FileEncryptionConfig]; ok {
		// Secrets encrypted at rest in etcd (spec.secretEncryption).
		args = append(args, "--encryption-provider-config="+in.path(FileEncryptionConfig))
	}
	if in.Policy == api.HighlyAvailable {
		// Keep serving after SIGTERM while /readyz fails, so the load balancer in front
		// (probing /readyz every 500ms) stops sending new connections before this replica
		// stops listening: a rollout fails no client request.
		args = append(args, "--shutdown-delay-duration="+ShutdownDelay.String())
	}
	return args, nil
}

// auditArgs are replica n's audit flags: the cluster's policy, and a JSON log of its own.
func auditArgs(in *Inputs, n int) []string {
	return audit.Flags(in.Audit.WithDefaults(), in.path(FileAuditPolicy), in.path(AuditLogFile(n)))
}

// ShutdownDelay is how long a HighlyAvailable kube-apiserver replica keeps serving after
// SIGTERM (--shutdown-delay-duration): several of infrad's load-balancer probe intervals.
const ShutdownDelay = 3 * time.Second

// apiServerProbe GETs /readyz, trusting the cluster's root CA and presenting the admin
// certificate (anonymous when the inputs carry none).
func apiServerProbe(in *Inputs, n int) (process.Probe, error) {
	ep, err := apiServerEndpoint(in, n)
	if err != nil {
		return nil, err
	}
	c, err := tlsClient(in.Files[CertFile(api.CertRootCA)], in.AdminCert, in.AdminKey)
	if err != nil {
		return nil, err
	}
	return process.HTTPProbe(c, httpsURL(ep.Host, ep.Port, "/readyz"), nil), nil
}
