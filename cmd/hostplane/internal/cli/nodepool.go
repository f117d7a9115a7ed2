package cli

import (
	"fmt"
	"maps"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

// Node pool commands speak the NodePool API of ARCHITECTURE 5a (a server without
// /v1/clusters/{c}/nodepools gets "not available yet", exit code 1).

// nodePoolStep says on stdout what was done to a node pool; --wait then waits for spec.
func (o *Options) nodePoolStep(c *client.Client, said string, spec waitSpec) step {
	return step{said: said, kept: true, until: o.waitFor(c, spec, spec.goal+": done")}
}

// patchNodePool sends a merge patch of the pool's spec and returns the pool's generation.
func patchNodePool(cmd *cobra.Command, c *client.Client, cluster, name string, spec map[string]any) (int64, error) {
	var pool api.NodePool
	if err := c.Do(cmd.Context(), http.MethodPatch, client.ClusterPath(cluster, "nodepools", name), map[string]any{"spec": spec}, &pool); err != nil {
		return 0, notServed(err, routeNodePools)
	}
	return pool.Generation, nil
}

// addClusterFlag adds -c/--cluster, which cmd requires: without it, cmd fails with a usage
// error before it runs.
func addClusterFlag(o *Options, cmd *cobra.Command, cluster *string, help string) {
	cmd.Flags().StringVarP(cluster, "cluster", "c", "", help)
	_ = cmd.RegisterFlagCompletionFunc("cluster", o.completeClusters)
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if *cluster == "" {
			return usagef(cmd, "--cluster is required")
		}
		return nil
	}
}

func newCreateNodePoolCommand(o *Options) *cobra.Command {
	var (
		cluster, rel, upgradeType  string
		instanceType               string
		replicas, minSize, maxSize int
		autoRepair                 bool
	)
	cmd := action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			if rel == "" {
				// Default to the cluster's release, as HyperShift does.
				cl, err := c.GetCluster(cmd.Context(), cluster)
				if err != nil {
					return step{}, err
				}
				rel = cl.Spec.Release.Version
			}
			autoscaled := cmd.Flags().Changed("min") || cmd.Flags().Changed("max")
			if autoscaled && cmd.Flags().Changed("replicas") {
				return step{}, usagef(cmd, "--replicas cannot go with --min/--max: a pool has a fixed size or autoscales")
			}
			if autoscaled && !(cmd.Flags().Changed("min") && cmd.Flags().Changed("max")) {
				return step{}, usagef(cmd, "an autoscaled pool needs both --min and --max")
			}
			size := map[string]any{"replicas": replicas}
			if autoscaled {
				// The server checks the bounds (min ≤ max, max ≥ 1) and names the field.
				size = map[string]any{"autoScaling": api.NodePoolAutoScaling{Min: int32(minSize), Max: int32(maxSize)}}
			}
			body := map[string]any{
				"name": args[0],
				"spec": map[string]any{
					"release": api.Release{Version: rel},
					"management": map[string]any{
						"upgradeType": upgradeType,
						"autoRepair":  autoRepair,
					},
				},
			}
			maps.Copy(body["spec"].(map[string]any), size)
			if instanceType != "" {
				// The platform type defaults to the cluster's; the server names the valid types.
				body["spec"].(map[string]any)["platform"] = map[string]any{"local": api.LocalNodePoolPlatform{InstanceType: instanceType}}
			}
			var np api.NodePool
			if err := c.Do(cmd.Context(), http.MethodPost, client.ClusterPath(cluster, "nodepools"), body, &np); err != nil {
				return step{}, notServed(err, routeNodePools)
			}
			return o.nodePoolStep(c, fmt.Sprintf("nodepool/%s created in cluster %s", args[0], cluster),
				nodePoolReadySpec(cluster, args[0], np.Generation, "node pool "+args[0]+" Ready")), nil
		},
		waits: "every machine's node is Ready",
	}.command(o, &cobra.Command{
		Use:               "nodepool NAME --cluster CLUSTER (--replicas N | --min N --max M)",
		Aliases:           []string{"np"},
		Short:             "Create a node pool: worker machines that join the cluster",
		Example:           "  hostplane create nodepool workers --cluster demo --replicas 3\n  hostplane create nodepool big --cluster demo --replicas 1 --instance-type local.large\n  hostplane create nodepool auto --cluster demo --min 1 --max 5   # autoscaled: see docs/autoscaling.md",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
	})
	addClusterFlag(o, cmd, &cluster, "the node pool's cluster (required)")
	f := cmd.Flags()
	f.IntVar(&replicas, "replicas", 1, "number of machines")
	f.IntVar(&minSize, "min", 0, "autoscale the pool: fewest machines (with --max; not with --replicas)")
	f.IntVar(&maxSize, "max", 0, "autoscale the pool: most machines (with --min)")
	f.StringVar(&rel, "release", "", "Kubernetes release of the machines (default: the cluster's)")
	f.StringVar(&upgradeType, "upgrade-type", "Replace", "how machines move to a new release or config: Replace or InPlace (immutable)")
	f.BoolVar(&autoRepair, "auto-repair", true, "replace machines whose node stays unhealthy")
	f.StringVar(&instanceType, "instance-type", "", "the machines' shape on platform local (default "+api.DefaultInstanceType+"; see GET /v1/platforms/local/instancetypes)")
	_ = cmd.RegisterFlagCompletionFunc("release", completeReleases)
	_ = cmd.RegisterFlagCompletionFunc("instance-type", completeInstanceTypes)
	_ = cmd.RegisterFlagCompletionFunc("upgrade-type", cobra.FixedCompletions([]string{"Replace", "InPlace"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newDeleteNodePoolCommand(o *Options) *cobra.Command {
	var cluster string
	return action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			if err := c.Do(cmd.Context(), http.MethodDelete, client.ClusterPath(cluster, "nodepools", args[0]), nil, nil); err != nil {
				return step{}, notServed(err, routeNodePools)
			}
			return o.nodePoolStep(c, "nodepool/"+args[0]+" deleting", nodePoolGoneSpec(cluster, args[0])), nil
		},
		waits: "its machines are gone",
	}.command(o, o.onNodePool("nodepool NAME --cluster CLUSTER", "Delete a node pool: drain and remove its machines", "", &cluster))
}

// onNodePool is the command of a change to one node pool, `VERB nodepool NAME --cluster
// CLUSTER`; it adds --cluster, which fills cluster.
func (o *Options) onNodePool(use, short, example string, cluster *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:               use,
		Aliases:           []string{"np"},
		Short:             short,
		Example:           example,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: o.completeNodePools(cluster),
	}
	addClusterFlag(o, cmd, cluster, "the node pool's cluster (required)")
	return cmd
}

func newScaleCommand(o *Options) *cobra.Command {
	var (
		cluster  string
		replicas int
	)
	np := action{
		check: func(cmd *cobra.Command) error {
			if !cmd.Flags().Changed("replicas") || replicas < 0 {
				return usagef(cmd, "--replicas N (N >= 0) is required")
			}
			return nil
		},
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			gen, err := patchNodePool(cmd, c, cluster, args[0], map[string]any{"replicas": replicas})
			if err != nil {
				return step{}, err
			}
			return o.nodePoolStep(c, fmt.Sprintf("nodepool/%s scaled to %d", args[0], replicas),
				nodePoolReadySpec(cluster, args[0], gen, fmt.Sprintf("node pool %s at %d machines", args[0], replicas))), nil
		},
		waits: "the pool has that many Ready machines",
	}.command(o, o.onNodePool("nodepool NAME --cluster CLUSTER --replicas N", "Set a node pool's replicas",
		"  hostplane scale nodepool workers --cluster demo --replicas 5", &cluster))
	np.Flags().IntVar(&replicas, "replicas", 0, "number of machines (required)")
	return group("scale", "Change the number of machines of a node pool", np)
}

func newUpgradeNodePoolCommand(o *Options) *cobra.Command {
	var cluster, rel string
	cmd := action{
		check: requireRelease(&rel),
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			gen, err := patchNodePool(cmd, c, cluster, args[0], map[string]any{"release": api.Release{Version: rel}})
			if err != nil {
				return step{}, err
			}
			return o.nodePoolStep(c, "nodepool/"+args[0]+" upgrading to "+rel, nodePoolReadySpec(cluster, args[0], gen, "node pool "+args[0]+" at "+rel)), nil
		},
		waits: "every machine runs the release",
	}.command(o, o.onNodePool("nodepool NAME --cluster CLUSTER --release VERSION", "Roll a node pool's machines to another release", "", &cluster))
	cmd.Flags().StringVar(&rel, "release", "", "release to move to (required)")
	_ = cmd.RegisterFlagCompletionFunc("release", completeReleases)
	return cmd
}
