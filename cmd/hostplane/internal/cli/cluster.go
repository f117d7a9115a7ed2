package cli

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

func newCreateCommand(o *Options) *cobra.Command {
	return group("create", "Create a cluster, a node pool or an etcd backup",
		newCreateClusterCommand(o), newCreateNodePoolCommand(o), newCreateBackupCommand(o))
}

func newCreateClusterCommand(o *Options) *cobra.Command {
	var (
		rel, platform, availability string
		restoreFrom                 string
		scaleUpOnly, autoNode       bool
		unneeded                    time.Duration
		maxNodes                    int32
	)
	cmd := &cobra.Command{
		Use:     "cluster NAME --release VERSION",
		Aliases: []string{"hostedcluster", "hc"},
		Short:   "Create a hosted cluster: a real Kubernetes control plane",
		Example: `  hostplane create cluster demo --release 1.34.4 --wait
  hostplane create cluster ha --release 1.34.4 --availability HighlyAvailable`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	action{
		check: requireRelease(&rel),
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			in := &api.Cluster{Spec: api.ClusterSpec{
				Release:                      api.Release{Version: rel},
				Platform:                     api.Platform{Type: platform},
				ControllerAvailabilityPolicy: availability,
			}}
			if scaleUpOnly || cmd.Flags().Changed("scale-down-unneeded-time") || cmd.Flags().Changed("max-nodes-total") {
				in.Spec.Autoscaling = &api.ClusterAutoscaling{}
				if cmd.Flags().Changed("max-nodes-total") {
					in.Spec.Autoscaling.MaxNodesTotal = &maxNodes
				}
				if scaleUpOnly {
					in.Spec.Autoscaling.Scaling = api.ScaleUpOnly
				}
				if cmd.Flags().Changed("scale-down-unneeded-time") {
					secs := int32(unneeded / time.Second)
					in.Spec.Autoscaling.ScaleDown = &api.ScaleDownConfig{UnneededDurationSeconds: &secs}
				}
			}
			if restoreFrom != "" {
				var err error
				if in.Spec.RestoreFrom, err = parseRestoreFrom(cmd, restoreFrom); err != nil {
					return step{}, err
				}
			}
			if autoNode {
				in.Spec.AutoNode = &api.AutoNode{ProvisionerConfig: api.ProvisionerConfig{Name: api.ProvisionerKarpenter}}
			}
			in.Name = args[0]
			cl, err := c.CreateCluster(cmd.Context(), in)
			if err != nil {
				return step{}, err
			}
			return step{said: "cluster/" + cl.Name + " created", answer: cl, until: func(cx context.Context, timeout time.Duration) (string, any, error) {
				if err := o.wait(cx, c, availableSpec(cl.Name, cl.Generation), timeout); err != nil {
					return "", nil, err
				}
				cl, err := c.GetCluster(cx, cl.Name)
				if err != nil {
					return "", nil, err
				}
				return fmt.Sprintf("cluster/%s is Available at %s", cl.Name, endpointURL(cl.Status.ControlPlaneEndpoint)), cl, nil
			}}, nil
		},
		waits:  "Available",
		output: "print the created cluster as json or yaml instead of a message",
	}.command(o, cmd)
	f := cmd.Flags()
	f.StringVar(&rel, "release", "", "Kubernetes release to run (required)")
	f.StringVar(&platform, "platform", api.PlatformLocal, "platform of the worker machines: local (simulated), docker (containers of the node image) or none (your own)")
	f.StringVar(&availability, "availability", api.SingleReplica, "control-plane availability: SingleReplica or HighlyAvailable")
	f.DurationVar(&unneeded, "scale-down-unneeded-time", 10*time.Minute, "autoscaled pools: how long an added node is unneeded before it goes (spec.autoscaling.scaleDown)")
	f.Int32Var(&maxNodes, "max-nodes-total", 0, "autoscaling and autoprovisioning add no machine beyond this many in the cluster (spec.autoscaling.maxNodesTotal)")
	f.StringVar(&restoreFrom, "restore-from", "", "start the cluster's etcd from a complete backup, CLUSTER/BACKUP (spec.restoreFrom; docs/backups.md)")
	f.BoolVar(&autoNode, "auto-node", false, "autoprovisioning: Karpenter launches machines for the karpenter.sh NodePools you create in the guest (spec.autoNode)")
	f.BoolVar(&scaleUpOnly, "scale-up-only", false, "autoscaled pools grow but never shrink (spec.autoscaling.scaling: ScaleUpOnly)")
	_ = cmd.RegisterFlagCompletionFunc("release", completeReleases)
	_ = cmd.RegisterFlagCompletionFunc("platform", cobra.FixedCompletions(api.Platforms, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("availability", cobra.FixedCompletions([]string{api.SingleReplica, api.HighlyAvailable}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newDeleteCommand(o *Options) *cobra.Command {
	return group("delete", "Delete a cluster, a node pool or an etcd backup",
		newDeleteClusterCommand(o), newDeleteNodePoolCommand(o), newDeleteBackupCommand(o))
}

func newDeleteClusterCommand(o *Options) *cobra.Command {
	return action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			name := args[0]
			if _, err := c.DeleteCluster(cmd.Context(), name); err != nil {
				return step{}, err
			}
			spec := waitSpec{
				goal: "deletion", cluster: name,
				done: func(obs observation) (bool, error) { return obs.cluster == nil, nil },
				detail: func(obs observation) string {
					return cmp.Or(conditionMessage(obs.cluster, api.ConditionDeleting), "deletion requested")
				},
			}
			return step{said: "cluster/" + name + " deleting", until: o.waitFor(c, spec, "cluster/"+name+" deleted")}, nil
		},
		waits: "everything of the cluster is gone",
	}.command(o, o.onCluster("cluster NAME", "Delete a cluster: its control plane, infrastructure and certificates", "  hostplane delete cluster demo --wait"))
}

// onCluster is the command of a change to one cluster, `VERB cluster NAME`.
func (o *Options) onCluster(use, short, example string) *cobra.Command {
	return &cobra.Command{
		Use:               use,
		Aliases:           []string{"hostedcluster", "hc"},
		Short:             short,
		Example:           example,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: o.completeClusters,
	}
}

func newUpgradeCommand(o *Options) *cobra.Command {
	return group("upgrade", "Move a cluster or a node pool to another Kubernetes release", newUpgradeClusterCommand(o), newUpgradeNodePoolCommand(o))
}

func newUpgradeClusterCommand(o *Options) *cobra.Command {
	var rel string
	cmd := action{
		check: requireRelease(&rel),
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			name := args[0]
			patch := map[string]any{"spec": map[string]any{"release": map[string]any{"version": rel}}}
			cl, err := c.PatchCluster(cmd.Context(), name, patch)
			if err != nil {
				return step{}, err
			}
			gen := cl.Generation
			spec := waitSpec{
				goal: "release " + rel, cluster: name, components: true,
				done: func(obs observation) (bool, error) {
					cl := obs.cluster
					if cl == nil {
						return false, fmt.Errorf("cluster %s was deleted during the upgrade", name)
					}
					if err := invalidConfig(cl); err != nil {
						return false, err
					}
					if cl.Spec.Release.Version != rel {
						return false, fmt.Errorf("cluster %s's release was changed to %s by someone else", name, cl.Spec.Release.Version)
					}
					return cl.Status.ObservedGeneration >= gen && clusterVersion(cl) == rel &&
						cl.Status.Conditions.IsTrue(api.ConditionAvailable) &&
						!cl.Status.Conditions.IsTrue(api.ConditionProgressing), nil
				},
				detail: func(obs observation) string {
					if s := componentSummary(obs.components, rel); s != "" {
						return s
					}
					return conditionMessage(obs.cluster, api.ConditionProgressing)
				},
			}
			return step{said: "cluster/" + name + " upgrading to " + rel, until: o.waitFor(c, spec, "cluster/"+name+" runs "+rel)}, nil
		},
		waits: "every component runs the release",
	}.command(o, o.onCluster("cluster NAME --release VERSION", "Roll a cluster's control plane to another release, one component at a time",
		"  hostplane upgrade cluster demo --release 1.34.4 --wait"))
	cmd.Flags().StringVar(&rel, "release", "", "release to move to (required)")
	_ = cmd.RegisterFlagCompletionFunc("release", completeReleases)
	return cmd
}
