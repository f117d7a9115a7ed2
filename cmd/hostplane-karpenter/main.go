// Command hostplane-karpenter runs Karpenter's upstream core (sigs.k8s.io/karpenter) for one
// guest cluster with Hostplane's cloud provider: the control-plane component that grows an
// autoscaled NodePool when pods cannot be scheduled and shrinks it when its nodes are unneeded.
// componentd runs one per cluster that has an autoscaled pool.
//
// Karpenter's core reads its own settings from the environment (it parses the command line
// itself): KUBECONFIG is the guest's kubeconfig, METRICS_PORT and HEALTH_PROBE_PORT its ports,
// DISABLE_LEADER_ELECTION=true for a single replica. Hostplane's settings are environment
// variables too:
//
//	HOSTPLANE_MANAGEMENT_KUBECONFIG  kubeconfig of the management cluster (Cluster API objects)
//	HOSTPLANE_NAMESPACE              the cluster's control-plane namespace there
//	HOSTPLANE_CLUSTER                the cluster's name
//	HOSTPLANE_SCALE_DOWN             "false" keeps every node added (default true)
//	HOSTPLANE_UNNEEDED_TIME          how long a node is unneeded before it goes (default 10m)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"

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
	managementKubeconfig, namespace, cluster string
	options                                  guest.Options
}

func readSettings() (settings, error) {
	s := settings{
		managementKubeconfig: os.Getenv("HOSTPLANE_MANAGEMENT_KUBECONFIG"),
		namespace:            os.Getenv("HOSTPLANE_NAMESPACE"),
		cluster:              os.Getenv("HOSTPLANE_CLUSTER"),
		options:              guest.Options{ScaleDown: true, UnneededTime: 10 * time.Minute},
	}
	for name, v := range map[string]string{"HOSTPLANE_MANAGEMENT_KUBECONFIG": s.managementKubeconfig,
		"HOSTPLANE_NAMESPACE": s.namespace, "HOSTPLANE_CLUSTER": s.cluster, "KUBECONFIG": os.Getenv("KUBECONFIG")} {
		if v == "" {
			return s, fmt.Errorf("%s is not set", name)
		}
	}
	if v := os.Getenv("HOSTPLANE_SCALE_DOWN"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("HOSTPLANE_SCALE_DOWN=%q: want true or false", v)
		}
		s.options.ScaleDown = b
	}
	if v := os.Getenv("HOSTPLANE_UNNEEDED_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("HOSTPLANE_UNNEEDED_TIME=%q: want a duration such as 10m", v)
		}
		s.options.UnneededTime = d
	}
	return s, nil
}

func run() error {
	s, err := readSettings()
	if err != nil {
		return err
	}
	mgmtCfg, err := clientcmd.BuildConfigFromFlags("", s.managementKubeconfig)
	if err != nil {
		return fmt.Errorf("management kubeconfig: %w", err)
	}
	sch := runtime.NewScheme()
	if err := clusterv1.AddToScheme(sch); err != nil {
		return err
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

	cp := provider.New(provider.Config{Management: mgmt, Namespace: s.namespace, Cluster: s.cluster, Guest: op.GetClient()})
	decorated := overlay.Decorate(cp, op.GetClient(), op.InstanceTypeStore)
	cluster := state.NewCluster(op.Clock, op.GetClient(), decorated)
	if err := op.Add(&guest.Syncer{Guest: op.GetClient(), Provider: cp, Options: s.options}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("starting Karpenter for a Hostplane cluster", "cluster", s.cluster, "namespace", s.namespace,
		"scaleDown", s.options.ScaleDown, "unneededTime", s.options.UnneededTime.String())
	op.WithControllers(ctx, controllers.NewControllers(ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
		decorated, cp, cluster, op.InstanceTypeStore)...).Start(ctx)
	return nil
}
