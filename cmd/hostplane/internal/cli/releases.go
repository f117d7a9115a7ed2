package cli

import (
	"github.com/spf13/cobra"
)

func newGetReleasesCommand(o *Options) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "releases",
		Aliases: []string{"release", "rel"},
		Short:   "List the Kubernetes releases and whether they can run now",
		Long: `List every Kubernetes release clusters may ask for, with its state: Available (it runs
now), Building (its binaries are being built; clusters at it wait and then start) or NotBuilt.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			l, err := c.Releases(ctx(cmd))
			if err != nil {
				return err
			}
			if ok, err := printObject(o.Out, out, l); ok {
				return err
			}
			header := []string{"VERSION", "STATE", "DEFAULT", "ETCD"}
			if out == OutputWide {
				header = append(header, "MESSAGE")
			}
			t := newTable(o.Out, header...)
			for _, r := range l.Items {
				def := ""
				if r.Default {
					def = "*"
				}
				row := []string{r.Version, r.State, def, r.EtcdVersion}
				if out == OutputWide {
					row = append(row, r.Message)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	addOutputFlag(cmd, &out)
	return cmd
}
