package cli

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

func newHibernateCommand(o *Options) *cobra.Command {
	return group("hibernate", "Stop a cluster's control plane and machines, keeping its data (docs/hibernation.md)", newHibernationCommand(o, true))
}

func newResumeCommand(o *Options) *cobra.Command {
	return group("resume", "Wake a hibernated cluster: the same control plane and Nodes come back", newHibernationCommand(o, false))
}

// newHibernationCommand is `hibernate cluster NAME` (hibernate) or `resume cluster NAME`:
// PATCH spec.hibernation.enabled, and with --wait wait for the Hibernated condition (or
// Available, for resume).
func newHibernationCommand(o *Options, hibernate bool) *cobra.Command {
	short, example, goal, verb, done := "Hibernate a cluster: no control-plane process or machine of it runs until it is resumed or a client connects",
		"  hostplane hibernate cluster demo --wait", "Hibernated", "hibernating", "hibernated"
	if !hibernate {
		short, example, goal, verb, done = "Resume a hibernated cluster", "  hostplane resume cluster demo --wait", "Available", "resuming", "resumed"
	}
	return action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			name := args[0]
			patch := map[string]any{"spec": map[string]any{"hibernation": map[string]any{"enabled": hibernate}}}
			if _, err := c.PatchCluster(cmd.Context(), name, patch); err != nil {
				return step{}, err
			}
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
					return cmp.Or(conditionMessage(obs.cluster, api.ConditionHibernated), verb)
				},
			}
			return step{said: "cluster/" + name + " " + verb, until: o.waitFor(c, spec, "cluster/"+name+" "+done)}, nil
		},
		waits: goal,
	}.command(o, o.onCluster("cluster NAME", short, example))
}
