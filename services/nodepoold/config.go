package nodepoold

import (
	"fmt"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/ignitiond/ignconfig"
)

// checkConfigDocument validates one config document with ignitiond's parser, so a pool is
// refused at the API for exactly what ignitiond could not render.
func checkConfigDocument(doc api.ConfigDocument) error {
	if _, err := ignconfig.ParseDocument(doc.Content); err != nil {
		return fmt.Errorf("config document %q: %w", doc.Name, err)
	}
	return nil
}

// cutEventKey splits an event key "<cluster>/<name>".
func cutEventKey(key string) (cluster, name string, ok bool) {
	cluster, name, ok = strings.Cut(key, "/")
	return cluster, name, ok && cluster != "" && name != ""
}

// eventKey is the event key of a pool: "<cluster>/<nodepool>".
func eventKey(cluster, pool string) string { return cluster + "/" + pool }
