package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/cmd/hostplane/internal/client"
	"github.com/hostplane/hostplane/pkg/api"
)

// describeEvents is how many recent events describe shows.
const describeEvents = 15

func newDescribeCommand(o *Options) *cobra.Command {
	cmd := group("describe", "Show a cluster in detail: spec, conditions, versions, components, events")
	var since time.Duration
	cl := &cobra.Command{
		Use:               "cluster NAME",
		Aliases:           []string{"clusters", "hostedcluster", "hc"},
		Short:             "Show a cluster in detail",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			cx := ctx(cmd)
			cluster, err := c.GetCluster(cx, args[0])
			if err != nil {
				return err
			}
			comps, err := components(cx, c, args[0])
			if err != nil {
				comps = nil
			}
			evs, evErr := recentEvents(cx, c, args[0], time.Now().Add(-since), describeEvents)
			return describeCluster(o.Out, time.Now(), cluster, comps, evs, evErr)
		},
	}
	cl.Flags().DurationVar(&since, "events-since", time.Hour, "show the events of this last period (at most 15)")
	cmd.AddCommand(cl)
	return cmd
}

func describeCluster(w io.Writer, now time.Time, c *api.Cluster, comps *api.ComponentList, evs []client.StreamEvent, evErr error) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, firstNonEmpty(v, "<none>")) }
	kv("Name", c.Name)
	kv("Created", fmt.Sprintf("%s (%s ago)", c.CreationTimestamp.UTC().Format(time.RFC3339), age(c.CreationTimestamp, now)))
	if c.DeletionTimestamp != nil {
		kv("Deletion requested", fmt.Sprintf("%s (%s ago)", c.DeletionTimestamp.UTC().Format(time.RFC3339), age(*c.DeletionTimestamp, now)))
	}
	kv("Generation", fmt.Sprintf("%d (observed %d)", c.Generation, c.Status.ObservedGeneration))
	kv("Release", c.Spec.Release.Version)
	kv("Platform", c.Spec.Platform.Type)
	kv("Availability", c.Spec.ControllerAvailabilityPolicy)
	kv("Networking", fmt.Sprintf("services %s, pods %s", firstNonEmpty(c.Spec.Networking.ServiceCIDR, "<default>"), firstNonEmpty(c.Spec.Networking.PodCIDR, "<default>")))
	if p := c.Spec.PKI; p != nil {
		kv("PKI lifetimes", fmt.Sprintf("CA %s, leaf %s", firstNonEmpty(p.CALifetime, "<default>"), firstNonEmpty(p.LeafLifetime, "<default>")))
	}
	kv("Endpoint", endpointURL(c.Status.ControlPlaneEndpoint))
	kv("Ignition endpoint", c.Status.IgnitionEndpoint)
	kc := "not yet"
	if c.Status.KubeconfigAvailable {
		kc = "available: hostplane kubeconfig " + c.Name
	}
	kv("Kubeconfig", kc)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nConditions:")
	if len(c.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		t := newTable(indent(w), "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
		for _, cond := range c.Status.Conditions {
			t.row(cond.Type, string(cond.Status), cond.Reason, age(cond.LastTransitionTime, now), cond.Message)
		}
		t.flush()
	}

	fmt.Fprintln(w, "\nVersion:")
	if v := c.Status.Version; v == nil {
		fmt.Fprintln(w, "  <none>")
	} else {
		fmt.Fprintf(w, "  Desired: %s\n", v.Desired.Version)
		if len(v.History) > 0 {
			t := newTable(indent(w), "VERSION", "STATE", "STARTED", "COMPLETED")
			for _, h := range v.History {
				done := ""
				if h.CompletionTime != nil {
					done = age(*h.CompletionTime, now) + " ago"
				}
				t.row(h.Version, h.State, age(h.StartedTime, now)+" ago", done)
			}
			t.flush()
		}
	}

	fmt.Fprintln(w, "\nComponents:")
	if comps == nil || len(comps.Items) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		t := newTable(indent(w), "NAME", "VERSION", "READY", "AVAILABLE", "PROGRESSING", "MESSAGE")
		for _, comp := range comps.Items {
			t.row(comp.Name, comp.Status.Version, fmt.Sprintf("%d/%d", comp.Status.ReadyReplicas, comp.Spec.Replicas),
				condStatus(comp.Status.Conditions, api.ConditionAvailable), componentProgressing(&comp), componentMessage(&comp))
		}
		t.flush()
	}

	fmt.Fprintln(w, "\nEvents:")
	switch {
	case client.IsRouteMissing(evErr):
		fmt.Fprintf(w, "  <omitted: the server has no %s route>\n", routeEvents)
	case evErr != nil && len(evs) == 0:
		fmt.Fprintf(w, "  <unavailable: %s>\n", firstLine(evErr))
	case len(evs) == 0:
		fmt.Fprintln(w, "  <none>")
	default:
		t := newTable(indent(w), "AGE", "TYPE", "SUBJECT", "SOURCE")
		for _, ev := range evs {
			e := ev.Event
			if e.Type == "" {
				t.row("", ev.Name, strings.TrimSpace(string(ev.Data)), "")
				continue
			}
			t.row(age(e.Time, now), shortType(e.Type), e.Subject, e.Source)
		}
		t.flush()
	}
	return nil
}

// indent prefixes every line written through it with two spaces.
func indent(w io.Writer) io.Writer { return &indentWriter{w: w, bol: true} }

type indentWriter struct {
	w   io.Writer
	bol bool
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, r := range string(p) {
		if iw.bol {
			b.WriteString("  ")
			iw.bol = false
		}
		b.WriteRune(r)
		if r == '\n' {
			iw.bol = true
		}
	}
	if _, err := io.WriteString(iw.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
