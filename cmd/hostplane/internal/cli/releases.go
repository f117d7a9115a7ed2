package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

func newGetReleasesCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "releases",
		Aliases: []string{"release", "rel"},
		Short:   "List the Kubernetes releases and whether they can run now",
		Long: `List every Kubernetes release clusters may ask for, with its state: Available (it runs
now), Building (its binaries are being built; clusters at it wait and then start) or NotBuilt.`,
		Args: exactArgs(),
	}
	return getter[[]api.ReleaseInfo]{
		fetch: func(cx context.Context, c *client.Client, _ []string) (any, []api.ReleaseInfo, error) {
			l, err := c.Releases(cx)
			if err != nil {
				return nil, nil, err
			}
			return l, l.Items, nil
		},
		table: func(s Streams, wide bool, releases []api.ReleaseInfo) error {
			t := newTable(s.Out, columns(wide, []string{"VERSION", "STATE", "DEFAULT", "ETCD"}, "MESSAGE")...)
			for _, r := range releases {
				def := ""
				if r.Default {
					def = "*"
				}
				row := []string{r.Version, r.State, def, r.EtcdVersion}
				if wide {
					row = append(row, r.Message)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}.command(o, cmd)
}
