package api

import "strings"

// KV keys. A cluster's own record is keyed by its name ("demo"); what belongs to one of its
// parts is keyed "<cluster>.<part>": a component in controlplane, a node pool in nodepools, a
// pool's token record in ignition. Cluster names are DNS labels, so they hold no dot and the
// first token always names the cluster.

// ComponentKey is the controlplane bucket key of a cluster's component: "<cluster>.<component>".
func ComponentKey(cluster, component string) string { return cluster + "." + component }

// ClusterPartsFilter is the KV key filter that matches every "<cluster>.<part>" key of one
// cluster (its components, node pools or token records) and no other cluster's.
func ClusterPartsFilter(cluster string) string { return cluster + ".*" }

// SplitPartKey splits a "<cluster>.<part>" key; ok is false for a key of another shape.
func SplitPartKey(key string) (cluster, part string, ok bool) {
	cluster, part, ok = strings.Cut(key, ".")
	return cluster, part, ok && cluster != "" && part != ""
}
