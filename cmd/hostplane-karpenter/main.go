// Command hostplane-karpenter runs Karpenter's upstream core (sigs.k8s.io/karpenter) for one
// guest cluster with Hostplane's cloud provider: the control-plane component that grows an
// autoscaled NodePool when pods cannot be scheduled and shrinks it when its nodes are unneeded.
// componentd runs one per cluster that has an autoscaled pool: a process beside the control
// plane's (process runtime), or a Deployment in the cluster's control-plane namespace of the
// management cluster (kubernetes runtime).
//
// Hostplane's settings are flags (each defaults to an environment variable), read and then
// removed from the command line before Karpenter's core parses it; Karpenter's own settings
// are environment variables: METRICS_PORT and HEALTH_PROBE_PORT its ports,
// DISABLE_LEADER_ELECTION=true for a single replica.
//
//	--kubeconfig             the guest's kubeconfig (KUBECONFIG)
//	--management-kubeconfig  the management cluster's (HOSTPLANE_MANAGEMENT_KUBECONFIG); when
//	                         neither is set, the pod's ServiceAccount (in-cluster config), as
//	                         componentd's kubernetes runtime runs it
//	--namespace              the cluster's control-plane namespace there (HOSTPLANE_NAMESPACE)
//	--cluster                the cluster's name (HOSTPLANE_CLUSTER)
//	--scale-down             false keeps every node added (HOSTPLANE_SCALE_DOWN; default true)
//	--unneeded-time          how long a node is unneeded before it goes (HOSTPLANE_UNNEEDED_TIME; default 10m)
//	--max-nodes-total        the cluster's machines at most, 0 for no bound (HOSTPLANE_MAX_NODES_TOTAL)
//	--max-pod-grace-period   how long a node that goes waits for its pods (HOSTPLANE_MAX_POD_GRACE_PERIOD; default 10m)
//	--max-node-provision-time how long a launch waits for its machine's provider ID (HOSTPLANE_MAX_NODE_PROVISION_TIME; default 15m)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/guest"
	"github.com/hostplane/hostplane/cmd/hostplane-karpenter/internal/provider"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hostplane-karpenter:", err)
		os.Exit(1)
	}
}

// settings are Hostplane's environment variables.
type settings struct {
	// managementKubeconfig is "" in a pod of the management cluster: see inCluster.
	managementKubeconfig, namespace, cluster string
	options                                  guest.Options
	// maxNodesTotal (0: none) and provisionTime are the provider's bounds.
	maxNodesTotal int32
	provisionTime time.Duration
}

// inCluster says whether the management cluster is reached with the pod's own
// ServiceAccount rather than a kubeconfig.
func (s settings) inCluster() bool { return s.managementKubeconfig == "" }

// managementConfig reaches the management cluster: with --management-kubeconfig, or else
// in-cluster.
func (s settings) managementConfig() (*rest.Config, error) {
	if !s.inCluster() {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.managementKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("management kubeconfig %s: %w", s.managementKubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --management-kubeconfig (HOSTPLANE_MANAGEMENT_KUBECONFIG), and no in-cluster config "+
			"(this is not a pod with a ServiceAccount token): %w", err)
	}
	return cfg, nil
}

func readSettings(args []string) (settings, error) {
	s := settings{options: guest.Options{ScaleDown: true, UnneededTime: 10 * time.Minute, MaxPodGracePeriod: 10 * time.Minute},
		provisionTime: 15 * time.Minute}
	var guestKubeconfig, scaleDown, unneeded, maxNodes, grace, provision string
	fs := flag.NewFlagSet("hostplane-karpenter", flag.ContinueOnError)
	fs.StringVar(&guestKubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the guest cluster's kubeconfig")
	fs.StringVar(&s.managementKubeconfig, "management-kubeconfig", os.Getenv("HOSTPLANE_MANAGEMENT_KUBECONFIG"),
		"the management cluster's kubeconfig (default: in-cluster config)")
	fs.StringVar(&s.namespace, "namespace", os.Getenv("HOSTPLANE_NAMESPACE"), "the cluster's control-plane namespace in the management cluster")
	fs.StringVar(&s.cluster, "cluster", os.Getenv("HOSTPLANE_CLUSTER"), "the cluster's name")
	fs.StringVar(&scaleDown, "scale-down", os.Getenv("HOSTPLANE_SCALE_DOWN"), "false keeps every node added (default true)")
	fs.StringVar(&unneeded, "unneeded-time", os.Getenv("HOSTPLANE_UNNEEDED_TIME"), "how long a node is unneeded before it goes (default 10m)")
	fs.StringVar(&maxNodes, "max-nodes-total", os.Getenv("HOSTPLANE_MAX_NODES_TOTAL"), "the cluster's machines at most (0: no bound)")
	fs.StringVar(&grace, "max-pod-grace-period", os.Getenv("HOSTPLANE_MAX_POD_GRACE_PERIOD"), "how long a node that goes waits for its pods to end (default 10m)")
	fs.StringVar(&provision, "max-node-provision-time", os.Getenv("HOSTPLANE_MAX_NODE_PROVISION_TIME"), "how long a launch waits for its machine's provider ID (default 15m)")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	for name, v := range map[string]string{"--namespace": s.namespace, "--cluster": s.cluster, "--kubeconfig": guestKubeconfig} {
		if v == "" {
			return s, fmt.Errorf("%s is not set", name)
		}
	}
	// Karpenter's core finds the guest through controller-runtime, which reads KUBECONFIG.
	if err := os.Setenv("KUBECONFIG", guestKubeconfig); err != nil {
		return s, err
	}
	if scaleDown != "" {
		b, err := strconv.ParseBool(scaleDown)
		if err != nil {
			return s, fmt.Errorf("--scale-down=%q: want true or false", scaleDown)
		}
		s.options.ScaleDown = b
	}
	if unneeded != "" {
		d, err := time.ParseDuration(unneeded)
		if err != nil || d < 0 {
			return s, fmt.Errorf("--unneeded-time=%q: want a duration such as 10m", unneeded)
		}
		s.options.UnneededTime = d
	}
	if maxNodes != "" {
		n, err := strconv.ParseInt(maxNodes, 10, 32)
		if err != nil || n < 0 {
			return s, fmt.Errorf("--max-nodes-total=%q: want a number of machines, 0 for no bound", maxNodes)
		}
		s.maxNodesTotal = int32(n)
	}
	for _, d := range []struct {
		flag, v string
		into    *time.Duration
	}{{"--max-pod-grace-period", grace, &s.options.MaxPodGracePeriod}, {"--max-node-provision-time", provision, &s.provisionTime}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < 0 {
			return s, fmt.Errorf("%s=%q: want a duration such as 10m", d.flag, d.v)
		}
		*d.into = v
	}
	return s, nil
}

func run() error {
	s, err := readSettings(os.Args[1:])
	if err != nil {
		return err
	}
	// Karpenter's core parses the command line itself and knows none of these flags.
	os.Args = os.Args[:1]
	mgmtCfg, err := s.managementConfig()
	if err != nil {
		return err
	}
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(sch); err != nil {
			return err
		}
	}
	mgmt, err := client.New(mgmtCfg, client.Options{Scheme: sch})
	if err != nil {
		return fmt.Errorf("management client: %w", err)
	}
	guestCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("guest kubeconfig: %w", err)
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Karpenter's informers need its CRDs served before its manager starts.
	if err := guest.InstallCRDs(sigCtx, guestCfg); err != nil {
		return err
	}

	ctx, op := operator.NewOperator()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-sigCtx.Done(); cancel() }()

	cp := provider.New(provider.Config{Management: mgmt, Namespace: s.namespace, Cluster: s.cluster, Guest: op.GetClient(),
		MaxNodesTotal: s.maxNodesTotal, LaunchTimeout: s.provisionTime})
	decorated := overlay.Decorate(cp, op.GetClient(), op.InstanceTypeStore)
	cluster := state.NewCluster(op.Clock, op.GetClient(), decorated)
	if err := op.Add(&guest.Syncer{Guest: op.GetClient(), Provider: cp, Options: s.options}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("starting Karpenter for a Hostplane cluster", "cluster", s.cluster, "namespace", s.namespace,
		"scaleDown", s.options.ScaleDown, "unneededTime", s.options.UnneededTime.String(), "managementInCluster", s.inCluster())
	op.WithControllers(ctx, controllers.NewControllers(ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
		decorated, cp, cluster, op.InstanceTypeStore)...).Start(ctx)
	return nil
}
