package component

import (
	"fmt"
	"strconv"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
)

func kubeControllerManager() *Component {
	return &Component{
		Name:      api.ComponentControllerManager,
		DependsOn: []string{api.ComponentKubeAPIServer},
		// It starts beside kube-apiserver and waits for it (it polls kube-apiserver's
		// /healthz before starting its controllers), so its own start-up is not added to
		// the cluster's (see delegatedAuthnArgs).
		StartAfter:   []string{api.ComponentEtcd},
		ReleaseBound: true,
		Uses: []string{
			KubeconfigFile(api.KubeconfigControllerMgr),
			CertFile(api.CertKubeletSigner), KeyFile(api.CertKubeletSigner),
			CertFile(api.CertRootCA),
			FileSAPrivate,
			FileClientCA, CertFile(api.CertFrontProxyCA),
		},
		single: 1, ha: 2,
		args: controllerManagerArgs,
		probe: func(in *Inputs, n int) (process.Probe, error) {
			port, err := replicaPort(in.Infra.ControllerManagerPorts, n, "kube-controller-manager")
			if err != nil {
				return nil, err
			}
			return healthzProbe(port)
		},
	}
}

func kubeScheduler() *Component {
	return &Component{
		Name:      api.ComponentScheduler,
		DependsOn: []string{api.ComponentKubeAPIServer},
		// As kube-controller-manager: its informers retry until kube-apiserver answers.
		StartAfter:   []string{api.ComponentEtcd},
		ReleaseBound: true,
		Uses:         []string{KubeconfigFile(api.KubeconfigScheduler), FileClientCA, CertFile(api.CertFrontProxyCA)},
		single:       1, ha: 2,
		args: schedulerArgs,
		probe: func(in *Inputs, n int) (process.Probe, error) {
			port, err := replicaPort(in.Infra.SchedulerPorts, n, "kube-scheduler")
			if err != nil {
				return nil, err
			}
			return healthzProbe(port)
		},
	}
}

func replicaPort(ports []int, n int, what string) (int, error) {
	if len(ports) <= n || ports[n] <= 0 {
		return 0, fmt.Errorf("%w: no %s port for replica %d", ErrIncompleteInfra, what, n)
	}
	return ports[n], nil
}

func controllerManagerArgs(in *Inputs, n int) ([]string, error) {
	port, err := replicaPort(in.Infra.ControllerManagerPorts, n, "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kubeconfig := in.path(KubeconfigFile(api.KubeconfigControllerMgr))
	return append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cluster-signing-cert-file=" + in.path(CertFile(api.CertKubeletSigner)),
		"--cluster-signing-key-file=" + in.path(KeyFile(api.CertKubeletSigner)),
		"--root-ca-file=" + in.path(CertFile(api.CertRootCA)),
		"--service-account-private-key-file=" + in.path(FileSAPrivate),
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + in.serviceCIDR(),
		"--cluster-cidr=" + in.podCIDR(),
		// Every Node gets a range of the pod network: real nodes' pod network (netd) is
		// made of them.
		"--allocate-node-cidrs=true",
		"--node-cidr-mask-size=" + strconv.Itoa(api.Networking{PodCIDR: in.podCIDR()}.NodeCIDRMaskSize()),
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=" + loopback,
		"--leader-elect=" + strconv.FormatBool(in.ha()),
		"--cluster-name=" + in.Cluster,
		"--profiling=false",
	}, delegatedAuthnArgs(in)...), nil
}

func schedulerArgs(in *Inputs, n int) ([]string, error) {
	port, err := replicaPort(in.Infra.SchedulerPorts, n, "kube-scheduler")
	if err != nil {
		return nil, err
	}
	kubeconfig := in.path(KubeconfigFile(api.KubeconfigScheduler))
	return append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=" + loopback,
		"--leader-elect=" + strconv.FormatBool(in.ha()),
		"--profiling=false",
	}, delegatedAuthnArgs(in)...), nil
}

// delegatedAuthnArgs give kube-controller-manager and kube-scheduler the client CAs of their
// secure port from files: the same CAs and front-proxy settings kube-apiserver publishes in
// kube-system/extension-apiserver-authentication, which they otherwise read from there at
// start-up, and exit when kube-apiserver does not answer yet. With the files they start
// before kube-apiserver is ready and wait for it.
func delegatedAuthnArgs(in *Inputs) []string {
	return []string{
		"--client-ca-file=" + in.path(FileClientCA),
		"--requestheader-client-ca-file=" + in.path(CertFile(api.CertFrontProxyCA)),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}
}
