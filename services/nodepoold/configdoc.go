package nodepoold

import (
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// checkConfigDocument validates one config document with pkg/ignition's parser (the one
// ignitiond renders with), so a pool is refused at the API for a document ignitiond could not
// parse.
func checkConfigDocument(doc api.ConfigDocument) error {
	if _, err := ignition.ParseDocument(doc.Content); err != nil {
		return fmt.Errorf("config document %q: %w", doc.Name, err)
	}
	return nil
}
