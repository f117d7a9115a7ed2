package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
)

func newHibernateCommand(o *Options) *cobra.Command {
	cmd := group("hibernate", "Stop a cluster's control plane and machines, keeping its data (docs/hibernation.md)")
	cmd.AddCommand(newHibernationCommand(o, true))
	return cmd
}

func newResumeCommand(o *Options) *cobra.Command {
	cmd := group("resume", "Wake a hibernated cluster: the same control plane and Nodes come back")
	cmd.AddCommand(newHibernationCommand(o, false))
	return cmd
}

// newHibernationCommand is `hibernate cluster NAME` (hibernate) or `resume cluster NAME`:
// PATCH spec.hibernation.enabled, and with --wait wait for the Hibernated condition (or
// Available, for resume).
func newHibernationCommand(o *Options, hibernate bool) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	short, example, goal, verb, done := "Hibernate a cluster: no control-plane process or machine of it runs until it is resumed or a client connects",
		"  hostplane hibernate cluster demo --wait", "Hibernated", "hibernating", "hibernated"
	if !hibernate {
		short, example, goal, verb, done = "Resume a hibernated cluster", "  hostplane resume cluster demo --wait", "Available", "resuming", "resumed"
	}
	cmd := &cobra.Command{
		Use:               "cluster NAME",
		Aliases:           []string{"hostedcluster", "hc"},
		Short:             short,
		Example:           example,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			name := args[0]
			patch := map[string]any{"spec": map[string]any{"hibernation": map[string]any{"enabled": hibernate}}}
			if _, err := c.PatchCluster(ctx(cmd), name, patch); err != nil {
				return err
			}
			if !wait {
				fmt.Fprintf(o.Out, "cluster/%s %s\n", name, verb)
				return nil
			}
			fmt.Fprintf(o.ErrOut, "cluster/%s %s\n", name, verb)
			spec := waitSpec{
				goal: goal, cluster: name,
				done: func(obs observation) (bool, error) {
					cl := obs.cluster
					if cl == nil {
						return false, fmt.Errorf("cluster %s was deleted", name)
					}
					if cl.Spec.Hibernating() != hibernate {
						return false, fmt.Errorf("cluster %s was %s by someone else", name, map[bool]string{true: "hibernated", false: "woken"}[cl.Spec.Hibernating()])
					}
					if hibernate {
						return cl.Status.Conditions.IsTrue(api.ConditionHibernated), nil
					}
					return cl.Status.Conditions.IsTrue(api.ConditionAvailable), nil
				},
				detail: func(obs observation) string {
					return firstNonEmpty(conditionMessage(obs.cluster, api.ConditionHibernated), verb)
				},
			}
			if err := o.wait(ctx(cmd), c, spec, timeout); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "cluster/%s %s\n", name, done)
			return nil
		},
	}
	addWaitFlags(cmd, &wait, &timeout, goal)
	return cmd
}
