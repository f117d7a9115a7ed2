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
