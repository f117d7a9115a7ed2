package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/release"
)

// DefaultTimeout bounds --wait.
const DefaultTimeout = 10 * time.Minute

// action is what a command that changes something does its own way: the request it sends
// and what it says. Its command does the rest as every such command does: check the flags,
// build the client, send, then say what was done or, with --wait, wait for the outcome and
// say that.
type action struct {
	// check, when set, validates the command's flags before any request.
	check func(cmd *cobra.Command) error
	// do sends the request and says what it did.
	do func(cmd *cobra.Command, c *client.Client, args []string) (step, error)
	// waits, when set, adds --wait ("wait until waits") and --timeout.
	waits string
	// output, when set, is the help of -o, which prints the answer as json or yaml instead
	// of a message.
	output string
}

// step is what a command did and, with --wait, what comes next.
type step struct {
	// said says what was done: on stdout, or on stderr before a wait (unless kept).
	said string
	// answer is what -o json|yaml prints instead of said.
	answer any
	// kept keeps said on stdout before a wait.
	kept bool
	// until waits for the outcome, then says it (done; answer for -o json|yaml); an empty
	// done says nothing more.
	until func(cx context.Context, timeout time.Duration) (done string, answer any, err error)
}

// command completes cmd, which has its use, help, arguments, completion and own flags, with
// the run of an action and its --wait, --timeout and -o flags.
func (a action) command(o *Options, cmd *cobra.Command) *cobra.Command {
	var (
		out     string
		wait    bool
		timeout time.Duration
	)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if a.check != nil {
			if err := a.check(cmd); err != nil {
				return err
			}
		}
		if out != "" {
			if err := checkOutput(cmd, out); err != nil {
				return err
			}
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		s, err := a.do(cmd, c, args)
		if err != nil {
			return err
		}
		if !wait {
			return printResult(o, out, s.answer, s.said)
		}
		w := o.ErrOut
		if s.kept {
			w = o.Out
		}
		fmt.Fprintln(w, s.said)
		done, answer, err := s.until(cmd.Context(), timeout)
		if err != nil || done == "" {
			return err
		}
		return printResult(o, out, answer, done)
	}
	if a.waits != "" {
		cmd.Flags().BoolVar(&wait, "wait", false, "wait until "+a.waits+", showing progress")
		cmd.Flags().DurationVar(&timeout, "timeout", DefaultTimeout, "how long --wait waits before giving up (exit code 4)")
	}
	if a.output != "" {
		cmd.Flags().StringVarP(&out, "output", "o", "", a.output)
	}
	return cmd
}

// waitFor is the until of a step that waits for spec, then says done.
func (o *Options) waitFor(c *client.Client, spec waitSpec, done string) func(context.Context, time.Duration) (string, any, error) {
	return func(cx context.Context, timeout time.Duration) (string, any, error) {
		return done, nil, o.wait(cx, c, spec, timeout)
	}
}

// printResult prints obj as json/yaml when asked, else the message.
func printResult(o *Options, format string, obj any, msg string) error {
	if format == OutputJSON || format == OutputYAML {
		_, err := printObject(o.Out, format, obj)
		return err
	}
	fmt.Fprintln(o.Out, msg)
	return nil
}

// requireRelease is the check of a command whose --release (rel) is required.
func requireRelease(rel *string) func(*cobra.Command) error {
	return func(cmd *cobra.Command) error {
		if *rel == "" {
			return usagef(cmd, "--release is required (one of %v)", release.Versions())
		}
		return nil
	}
}
