package nodepoold

import "strings"

// cutEventKey splits an event key "<cluster>/<name>".
func cutEventKey(key string) (cluster, name string, ok bool) {
	cluster, name, ok = strings.Cut(key, "/")
	return cluster, name, ok && cluster != "" && name != ""
}

// eventKey is the event key of a pool: "<cluster>/<nodepool>".
func eventKey(cluster, pool string) string { return cluster + "/" + pool }
