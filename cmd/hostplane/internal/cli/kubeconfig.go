package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

func newKubeconfigCommand(o *Options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "kubeconfig CLUSTER [-f FILE]",
		Short: "Print or write the cluster's admin kubeconfig",
		Example: `  hostplane kubeconfig demo > demo.kubeconfig
  hostplane kubeconfig demo -f demo.kubeconfig && kubectl --kubeconfig demo.kubeconfig get ns`,
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			kc, err := c.Kubeconfig(cmd.Context(), args[0])
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
			fmt.Fprintf(o.ErrOut, "wrote the admin kubeconfig of %s to %s\n", args[0], file)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to FILE (mode 0600) instead of standard output")
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
