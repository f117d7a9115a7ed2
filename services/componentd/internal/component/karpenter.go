package component

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/process"
)

// Autoscaler is what the karpenter component (the autoscaler) needs beyond the control
// plane's own inputs.
type Autoscaler struct {
	// Enabled is true while the cluster has an autoscaled NodePool: the component runs one
	// replica then, none otherwise.
	Enabled bool
	// Binary is the hostplane-karpenter executable.
	Binary string
	// ManagementKubeconfig reaches the management cluster's Cluster API objects, and
	// Namespace is the cluster's control-plane namespace there.
	ManagementKubeconfig, Namespace string
	// Options are the cluster's spec.autoscaling with defaults.
	Options api.ClusterAutoscaling
}

func karpenter() *Component {
	return &Component{
		Name:      api.ComponentKarpenter,
		DependsOn: []string{api.ComponentKubeAPIServer},
		Uses:      []string{KubeconfigFile(api.KubeconfigKarpenter)},
		single:    1, ha: 1, // one replica: Karpenter's decisions are not split
		StopTimeout: 10 * time.Second,
		enabled:     func(in *Inputs) bool { return in.Autoscaler.Enabled },
		binary: func(in *Inputs) (string, error) {
			if in.Autoscaler.Binary == "" {
				return "", fmt.Errorf("%w: no hostplane-karpenter executable (build it with `make build`, or set --karpenter-binary)", ErrCannotRun)
			}
			return in.Autoscaler.Binary, nil
		},
		args: karpenterArgs,
		env:  karpenterEnv,
		probe: func(in *Inputs, _ int) (process.Probe, error) {
			_, health, err := autoscalerPorts(in)
			if err != nil {
				return nil, err
			}
			c := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
			return process.HTTPProbe(c, "http://"+net.JoinHostPort(loopback, strconv.Itoa(health))+"/readyz", nil), nil
		},
	}
}

func autoscalerPorts(in *Inputs) (metrics, health int, err error) {
	p := in.Infra.AutoscalerPorts
	if len(p) < 2 || p[0] <= 0 || p[1] <= 0 {
		return 0, 0, fmt.Errorf("%w: no autoscaler ports", ErrIncompleteInfra)
	}
	return p[0], p[1], nil
}

// karpenterArgs are hostplane-karpenter's own settings. The guest kubeconfig's path names the
// cluster's directory, so the process is found like the cluster's other processes.
func karpenterArgs(in *Inputs, _ int) ([]string, error) {
	a := in.Autoscaler
	if a.ManagementKubeconfig == "" {
		return nil, fmt.Errorf("%w: the autoscaler needs the management cluster's kubeconfig (--management-kubeconfig)", ErrCannotRun)
	}
	return append([]string{
		"--kubeconfig=" + in.path(KubeconfigFile(api.KubeconfigKarpenter)),
		"--management-kubeconfig=" + a.ManagementKubeconfig,
		"--namespace=" + a.Namespace,
		"--cluster=" + in.Cluster,
	}, a.Options.AutoscalerFlags()...), nil
}

// karpenterEnv is the environment of Karpenter's core, which reads its own settings from
// there (it parses the command line itself).
func karpenterEnv(in *Inputs, _ int) ([]string, error) {
	metrics, health, err := autoscalerPorts(in)
	if err != nil {
		return nil, err
	}
	return []string{
		"METRICS_PORT=" + strconv.Itoa(metrics),
		"HEALTH_PROBE_PORT=" + strconv.Itoa(health),
		"DISABLE_LEADER_ELECTION=true",
		"LOG_LEVEL=info",
	}, nil
}
