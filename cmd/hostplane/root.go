package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/cmd/hostplane/internal/cli"
)

// usageError marks a mistake in how `hostplane dev` was called (exit code 2).
type usageError struct{ error }

// exitCode maps err to the documented exit codes (cli.ExitCodesHelp).
func exitCode(err error) int {
	if _, ok := errors.AsType[usageError](err); ok {
		return cli.ExitUsage
	}
	return cli.ExitCode(err)
}

func newRootCommand(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := cli.NewRoot(cli.Streams{In: in, Out: out, ErrOut: errOut})
	dev := newDevCommand()
	root.AddGroup(&cobra.Group{ID: "dev", Title: "Development:"})
	dev.GroupID = "dev"
	root.AddCommand(dev)
	root.AddGroup(&cobra.Group{ID: "serve", Title: "Running the parts separately (docker compose, Kubernetes):"})
	for _, c := range []*cobra.Command{newGatewayCommand(), newManagementCommand(), newCredentialsCommand()} {
		c.GroupID = "serve"
		root.AddCommand(c)
	}
	return root
}

// run executes the command line args and returns the process's exit code.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRootCommand(in, out, errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		cli.PrintError(errOut, err)
	}
	return exitCode(err)
}
