package ignition_test

import (
	"fmt"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
)

// ignitiond checks a pool's config documents, alone and merged, before it announces its userdata.
func ExampleValidateDocuments() {
	docs := []api.ConfigDocument{
		{Name: "motd", Content: "kind: MachineConfig\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n"},
		{Name: "notes", Content: "remember the milk"},
	}
	for _, e := range ignition.ValidateDocuments(docs) {
		fmt.Println(e.Field)
	}
	// Output: spec.config[1].content
}
