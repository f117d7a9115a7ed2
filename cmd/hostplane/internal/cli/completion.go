package cli

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/release"
)

// completionTimeout bounds an API call made to complete a word.
const completionTimeout = 5 * time.Second

// completeClusters completes the first argument with the names of the server's clusters.
func (o *Options) completeClusters(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 && cmd.Flags().Lookup("cluster") == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.clusterNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (o *Options) clusterNames(cmd *cobra.Command, prefix string) []string {
	c, err := o.client()
	if err != nil {
		return nil
	}
	cx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	l, err := c.ListClusters(cx)
	if err != nil {
		cobra.CompDebugln("listing clusters: "+err.Error(), true)
		return nil
	}
	var names []string
	for _, cl := range l.Items {
		if strings.HasPrefix(cl.Name, prefix) {
			names = append(names, cl.Name)
		}
	}
	return names
}

func (o *Options) nodePoolNames(cmd *cobra.Command, cluster, prefix string) []string {
	c, err := o.client()
	if err != nil || cluster == "" {
		return nil
	}
	cx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	var l struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	if err := c.Do(cx, http.MethodGet, client.ClusterPath(cluster, "nodepools"), nil, &l); err != nil {
		return nil
	}
	var names []string
	for _, np := range l.Items {
		if strings.HasPrefix(np.Name, prefix) {
			names = append(names, np.Name)
		}
	}
	return names
}

// completeClusterThenNodePool completes CLUSTER, then a node pool of it.
func (o *Options) completeClusterThenNodePool(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return o.clusterNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
	case 1:
		return o.nodePoolNames(cmd, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeNodePools completes a node pool of the --cluster flag's cluster.
func (o *Options) completeNodePools(cluster *string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return o.nodePoolNames(cmd, *cluster, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeReleases completes --release from the release catalogue.
func completeReleases(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return release.Versions(), cobra.ShellCompDirectiveNoFileComp
}

// completeInstanceTypes offers the local platform's instance types (the catalogue is
// compiled in, as the release list is).
func completeInstanceTypes(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	var names []string
	for _, t := range api.LocalInstanceTypes() {
		names = append(names, t.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
