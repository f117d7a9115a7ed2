package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

func newKubeconfigCommand(o *Options) *cobra.Command {
	var file, ttl string
	var breakGlass bool
	cmd := &cobra.Command{
		Use:   "kubeconfig CLUSTER [-f FILE] [--ttl 1h | --break-glass]",
		Short: "Print or write a kubeconfig of your own for the cluster (short-lived), or the break-glass admin one",
		Long: `Without --break-glass: a kubeconfig whose client certificate is yours (user hostplane:<your
token's name>, group hostplane:cluster-admins, bound to cluster-admin in the cluster), valid for
--ttl (5m to 24h): the cluster's audit log names you, and it ends when it expires. Ask again for
a new one.

With --break-glass: the cluster's admin kubeconfig (system:masters), which no RBAC change can
take away and which lives as long as the cluster's leaf certificates: for when the cluster's
RBAC is broken. Both need role admin.`,
		Example: `  hostplane kubeconfig demo > demo.kubeconfig
  hostplane kubeconfig demo -f demo.kubeconfig --ttl 8h && kubectl --kubeconfig demo.kubeconfig get ns
  hostplane kubeconfig demo --break-glass -f demo-admin.kubeconfig`,
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			if breakGlass && ttl != "" {
				return usagef(cmd, "--ttl is for a kubeconfig of your own; the break-glass one lives as long as the cluster's certificates")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			what := "a kubeconfig of your own"
			var kc []byte
			if breakGlass {
				what = "the break-glass admin kubeconfig"
				kc, err = c.Kubeconfig(cmd.Context(), args[0])
			} else {
				kc, err = c.IssueKubeconfig(cmd.Context(), args[0], ttl)
			}
			if err != nil {
				return err
			}
			if file == "" || file == "-" {
				_, err := o.Out.Write(kc)
				return err
			}
			if err := atomicfile.Write(file, kc, 0o600); err != nil { // it holds a key
				return err
			}
			fmt.Fprintf(o.ErrOut, "wrote %s for %s to %s\n", what, args[0], file)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to FILE (mode 0600) instead of standard output")
	cmd.Flags().StringVar(&ttl, "ttl", "", "how long your kubeconfig is valid, 5m to 24h (default 1h)")
	cmd.Flags().BoolVar(&breakGlass, "break-glass", false, "the cluster's admin kubeconfig (system:masters) instead of one of your own")
	return cmd
}

func newUserDataCommand(o *Options) *cobra.Command {
	var file, cluster string
	cmd := &cobra.Command{
		Use:   "userdata NODEPOOL -c CLUSTER [-f FILE]",
		Short: "Print or write the userdata machines of the node pool boot with (platform none: your own machines)",
		Long: `The pool's userdata is an Ignition config (spec 3.1.0) that fetches the pool's payload from the
cluster's Ignition server with the pool's token: a machine with systemd, containerd and Ignition
that boots it becomes a node of the pool (docs/real-nodes.md). It carries that token: role admin.`,
		Example: `  hostplane userdata byo -c metal -f userdata.ign`,
		Args:    exactArgs("NODEPOOL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ud, err := c.UserData(cmd.Context(), cluster, args[0])
			if err != nil {
				return err
			}
			if file == "" || file == "-" {
				_, err := o.Out.Write(ud)
				return err
			}
			if err := atomicfile.Write(file, ud, 0o600); err != nil { // it holds a token
				return err
			}
			fmt.Fprintf(o.ErrOut, "wrote the userdata of node pool %s/%s to %s\n", cluster, args[0], file)
			return nil
		},
	}
	addClusterFlag(o, cmd, &cluster, "the node pool's cluster")
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to FILE (mode 0600) instead of standard output")
	return cmd
}
