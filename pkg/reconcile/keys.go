package reconcile

import (
	"context"
	"strings"
)

// KeyLister lists the keys of a bucket (a store.Store of any type).
type KeyLister interface {
	Keys(ctx context.Context, filters ...string) ([]string, error)
}

// ClusterKeys returns a ListKeys function for a daemon that reconciles by cluster: the
// distinct cluster names among the keys of every lister, where a key "<cluster>" or
// "<cluster>.<rest>" names its cluster. A daemon passes the clusters bucket (work to start)
// and its own bucket (work to finish, such as clean-up after the cluster is gone).
func ClusterKeys(listers ...KeyLister) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		seen := map[string]bool{}
		var out []string
		for _, l := range listers {
			keys, err := l.Keys(ctx)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				cluster, _, _ := strings.Cut(k, ".")
				if !seen[cluster] {
					seen[cluster] = true
					out = append(out, cluster)
				}
			}
		}
		return out, nil
	}
}
