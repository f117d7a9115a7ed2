package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hostplane",
		Short:         "Hostplane runs real Kubernetes control planes and their worker pools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newDevCommand())
	return root
}
