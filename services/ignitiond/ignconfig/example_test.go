package ignconfig_test

import (
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/ignitiond/ignconfig"
)

// nodepoold validates a pool's config documents before it stores the pool.
func ExampleValidateDocuments() {
	docs := []api.ConfigDocument{
		{Name: "motd", Content: "kind: MachineConfig\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n"},
		{Name: "notes", Content: "remember the milk"},
	}
	for _, e := range ignconfig.ValidateDocuments(docs) {
		fmt.Println(e.Field)
	}
	// Output: spec.config[1].content
}
