package component

import (
	"fmt"
	"strconv"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
)

func kubeControllerManager() *Component {
	return &Component{
		Name:         api.ComponentControllerManager,
		DependsOn:    []string{api.ComponentKubeAPIServer},
		ReleaseBound: true,
		Uses: []string{
			KubeconfigFile(api.KubeconfigControllerMgr),
			CertFile(api.CertKubeletSigner), KeyFile(api.CertKubeletSigner),
			CertFile(api.CertRootCA),
			FileSAPrivate,
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
		Name:         api.ComponentScheduler,
		DependsOn:    []string{api.ComponentKubeAPIServer},
		ReleaseBound: true,
		Uses:         []string{KubeconfigFile(api.KubeconfigScheduler)},
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
	return []string{
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
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=" + loopback,
		"--leader-elect=" + strconv.FormatBool(in.ha()),
		"--cluster-name=" + in.Cluster,
		"--profiling=false",
	}, nil
}

func schedulerArgs(in *Inputs, n int) ([]string, error) {
	port, err := replicaPort(in.Infra.SchedulerPorts, n, "kube-scheduler")
	if err != nil {
		return nil, err
	}
	kubeconfig := in.path(KubeconfigFile(api.KubeconfigScheduler))
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=" + loopback,
		"--leader-elect=" + strconv.FormatBool(in.ha()),
		"--profiling=false",
	}, nil
}
