// Package cli implements hostplane's kubectl-like commands over the /v1 HTTP API: get,
// describe, create, delete, upgrade, scale, kubeconfig, events and config. NewRoot builds
// the command tree; ExitCode maps the error a command returned to the exit code scripts rely
// on (see ExitCodesHelp).
package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

// Exit codes.
const (
	ExitOK       = 0 // success
	ExitError    = 1 // the server refused or failed the operation, or the operation failed
	ExitUsage    = 2 // the command line is wrong (unknown command, flag or argument)
	ExitNotFound = 3 // the named object does not exist
	ExitTimeout  = 4 // --wait gave up after --timeout
	ExitAuth     = 5 // the server refused the credentials (401) or the role (403)
)

// ExitCodesHelp documents the exit codes in `hostplane --help`.
const ExitCodesHelp = `Exit codes:
  0  success
  1  the server refused or failed the operation (the problem's detail is printed)
  2  usage error: unknown command, flag or argument
  3  not found: the named cluster (or object) does not exist
  4  timed out waiting (--wait ... --timeout)
  5  unauthenticated or forbidden: check --token, HOSTPLANE_TOKEN or 'hostplane config set token'`

// UsageError marks a mistake in how a command was called (exit code 2).
type UsageError struct {
	Err error
	// Cmd is the command whose help the user should read.
	Cmd *cobra.Command
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usagef returns a UsageError for cmd.
func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), Cmd: cmd}
}

// TimeoutError says --wait gave up (exit code 4).
type TimeoutError struct{ Msg string }

func (e *TimeoutError) Error() string { return e.Msg }

// ExitCode returns the process exit code for err (nil: 0).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *UsageError
	var te *TimeoutError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &te):
		return ExitTimeout
	}
	switch client.CodeOf(err) {
	case api.CodeUnauthenticated, api.CodeForbidden:
		return ExitAuth
	case api.CodeNotFound:
		if client.IsRouteMissing(err) {
			return ExitError
		}
		return ExitNotFound
	}
	return ExitError
}

// PrintError writes err for a human: "Error: ..." and, for usage errors, where to read more.
func PrintError(w io.Writer, err error) {
	fmt.Fprintln(w, "Error:", err)
	switch client.CodeOf(err) {
	case api.CodeUnauthenticated:
		fmt.Fprintln(w, "The server wants a valid bearer token: pass --token, set HOSTPLANE_TOKEN, or run 'hostplane config set token TOKEN'.")
	case api.CodeForbidden:
		fmt.Fprintln(w, "The token is valid but its role does not allow this.")
	}
	if ue, ok := errors.AsType[*UsageError](err); ok && ue.Cmd != nil {
		fmt.Fprintf(w, "See '%s --help' for usage.\n", ue.Cmd.CommandPath())
	}
}

// Streams are the command's standard streams.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Options are the global flags and what they resolve to.
type Options struct {
	Streams
	server     string
	token      string
	configPath string
	getenv     func(string) string
}

// NewRoot returns the hostplane command with every CLI subcommand; the caller adds others
// (such as `dev`).
func NewRoot(s Streams) *cobra.Command {
	if s.In == nil {
		s.In = os.Stdin
	}
	if s.Out == nil {
		s.Out = os.Stdout
	}
	if s.ErrOut == nil {
		s.ErrOut = os.Stderr
	}
	o := &Options{Streams: s, getenv: os.Getenv}
	root := &cobra.Command{
		Use:   "hostplane",
		Short: "Hostplane runs real Kubernetes control planes and their worker pools",
		Long: `hostplane manages hosted Kubernetes control planes through the Hostplane API.

The server is --server, else HOSTPLANE_SERVER, else 'server' in the config file
($XDG_CONFIG_HOME/hostplane/config.yaml), else ` + client.DefaultServer + `.
The bearer token is --token, else HOSTPLANE_TOKEN, else 'token' in the config file.

` + ExitCodesHelp,
		Example: `  hostplane dev &                                    # everything in one process
  hostplane create cluster demo --release 1.34.4 --wait
  hostplane get clusters -o wide
  hostplane kubeconfig demo -f demo.kubeconfig
  hostplane events -f demo`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Any argument that is not a subcommand lands here: answer it as a usage error with
		// suggestions rather than cobra's help-and-exit-0.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownSubcommand(cmd, args[0])
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	root.SuggestionsMinimumDistance = suggestionDistance
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &UsageError{Err: err, Cmd: cmd}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&o.server, "server", "", "Hostplane API URL (env HOSTPLANE_SERVER; default "+client.DefaultServer+")")
	pf.StringVar(&o.token, "token", "", "bearer token for the API (env HOSTPLANE_TOKEN)")
	pf.StringVar(&o.configPath, "config", "", "config file (env HOSTPLANE_CONFIG; default $XDG_CONFIG_HOME/hostplane/config.yaml)")

	root.AddGroup(&cobra.Group{ID: "basic", Title: "Basic commands:"},
		&cobra.Group{ID: "cluster", Title: "Cluster commands:"},
		&cobra.Group{ID: "settings", Title: "Settings:"})
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("basic", newCreateCommand(o), newGetCommand(o), newDescribeCommand(o), newDeleteCommand(o))
	add("cluster", newUpgradeCommand(o), newScaleCommand(o), newHibernateCommand(o), newResumeCommand(o), newKubeconfigCommand(o), newUserDataCommand(o), newEventsCommand(o), newRestoreCommand(o), newPKICommand(o))
	add("settings", newConfigCommand(o))
	root.SetHelpCommandGroupID("settings")
	root.SetCompletionCommandGroupID("settings")
	return root
}

// unknownSubcommand is the usage error for `<cmd> <arg>` when arg names no subcommand.
func unknownSubcommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	if s := suggest(cmd, arg); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	} else if cmd.HasAvailableSubCommands() {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
				names = append(names, c.Name())
			}
		}
		msg += "\n\nAvailable: " + strings.Join(names, ", ")
	}
	return &UsageError{Err: errors.New(msg), Cmd: cmd}
}

// group returns a command that only holds subcommands (get, create, ...): without a
// subcommand it says what it needs, with an unknown one it suggests the nearest.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				var names []string
				for _, c := range cmd.Commands() {
					if c.IsAvailableCommand() {
						names = append(names, c.Name())
					}
				}
				return usagef(cmd, "%s needs a resource: %s", cmd.CommandPath(), strings.Join(names, ", "))
			}
			return unknownSubcommand(cmd, args[0])
		},
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	cmd.AddCommand(subs...)
	return cmd
}

// exactArgs requires exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usagef(cmd, "%s needs %s", cmd.CommandPath(), strings.Join(names[len(args):], " "))
		case len(args) > len(names):
			return usagef(cmd, "%s takes %d argument(s) (%s), got %d: %s", cmd.CommandPath(),
				len(names), strings.Join(names, " "), len(args), strings.Join(args, " "))
		}
		return nil
	}
}

// rangeArgs allows between min and max positional arguments.
func rangeArgs(lo, hi int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef(cmd, "usage: %s %s", cmd.CommandPath(), usage)
		}
		return nil
	}
}

// client returns an API client for the resolved server and token.
func (o *Options) client() (*client.Client, error) {
	server, token, err := o.resolve()
	if err != nil {
		return nil, err
	}
	return client.New(client.Options{Server: server, Token: token, UserAgent: "hostplane-cli"})
}

// resolve applies flag > environment > config file > default to server and token.
func (o *Options) resolve() (server, token string, err error) {
	cfg, _, err := o.loadConfig()
	if err != nil {
		return "", "", err
	}
	server = cmp.Or(o.server, o.getenv("HOSTPLANE_SERVER"), cfg.Server, client.DefaultServer)
	token = cmp.Or(o.token, o.getenv("HOSTPLANE_TOKEN"), cfg.Token)
	return server, token, nil
}

// suggestionDistance is the largest edit distance of a suggested command.
const suggestionDistance = 2

// suggest lists the available subcommands of cmd whose name or an alias is within
// suggestionDistance edits of typed, or starts with it.
func suggest(cmd *cobra.Command, typed string) []string {
	var out []string
	typed = strings.ToLower(typed)
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" {
			continue
		}
		for _, name := range append([]string{c.Name()}, c.Aliases...) {
			if levenshtein(typed, strings.ToLower(name)) <= suggestionDistance || strings.HasPrefix(name, typed) {
				out = append(out, c.Name())
				break
			}
		}
	}
	return out
}

// levenshtein is the edit distance between a and b.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
