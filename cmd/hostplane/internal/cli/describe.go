package cli

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

// describeEvents is how many recent events describe shows.
const describeEvents = 15

func newDescribeCommand(o *Options) *cobra.Command {
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
			cx := cmd.Context()
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
	return group("describe", "Show a cluster or a node pool in detail", cl, newDescribeNodePoolCommand(o))
}

func newDescribeNodePoolCommand(o *Options) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:               "nodepool NAME --cluster CLUSTER",
		Aliases:           []string{"nodepools", "np"},
		Short:             "Show a node pool in detail: spec, conditions, counts, version, machines",
		Example:           "  hostplane describe nodepool workers --cluster demo",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: o.completeNodePools(&cluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			cx := cmd.Context()
			var np api.NodePool
			if err := c.Do(cx, http.MethodGet, client.ClusterPath(cluster, "nodepools", args[0]), nil, &np); err != nil {
				return notServed(err, routeNodePools)
			}
			var ms api.MachineList
			msErr := c.Do(cx, http.MethodGet, client.ClusterPath(cluster, "machines"), nil, &ms)
			return describeNodePool(o.Out, time.Now(), &np, ms.Items, msErr)
		},
	}
	addClusterFlag(o, cmd, &cluster, "the node pool's cluster (required)")
	return cmd
}

func describeNodePool(w io.Writer, now time.Time, np *api.NodePool, machines []api.Machine, msErr error) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, cmp.Or(v, "<none>")) }
	kv("Name", np.Name)
	kv("Cluster", np.Cluster)
	describeMeta(kv, now, &np.ObjectMeta, np.Status.ObservedGeneration)
	kv("Release", np.Spec.Release.Version)
	kv("Platform", np.Spec.Platform.Type)
	if it := np.Spec.Platform.InstanceType(); it != "" {
		kv("Instance type", it)
	}
	desired := "<none>"
	if r := np.Spec.Replicas; r != nil {
		desired = fmt.Sprint(*r)
	}
	if a := np.Spec.AutoScaling; a != nil {
		desired = fmt.Sprintf("autoscaling %d-%d", a.Min, a.Max)
	}
	kv("Replicas", fmt.Sprintf("%s desired, %d current, %d ready, %d updated", desired,
		np.Status.Replicas, np.Status.ReadyReplicas, np.Status.UpdatedReplicas))
	if as := np.Status.Autoscaling; as != nil {
		last := "no scale yet"
		if ls := as.LastScale; ls != nil {
			last = fmt.Sprintf("last %d → %d, %s ago: %s", ls.From, ls.To, age(ls.Time, now), ls.Reason)
		}
		kv("Autoscaler", fmt.Sprintf("target %d; %s", as.TargetReplicas, last))
	}
	m := np.Spec.Management
	kv("Upgrade type", m.UpgradeType)
	kv("Auto repair", fmt.Sprint(m.AutoRepair))
	kv("Version", np.Status.Version)
	kv("Config hash", np.Status.ConfigHash)
	if len(np.Spec.Config) > 0 {
		names := make([]string, 0, len(np.Spec.Config))
		for _, d := range np.Spec.Config {
			names = append(names, d.Name)
		}
		kv("Config documents", strings.Join(names, ", "))
	}
	if len(np.Spec.NodeLabels) > 0 {
		labels := make([]string, 0, len(np.Spec.NodeLabels))
		for k, v := range np.Spec.NodeLabels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		kv("Node labels", strings.Join(labels, ", "))
	}
	if len(np.Spec.Taints) > 0 {
		taints := make([]string, 0, len(np.Spec.Taints))
		for _, t := range np.Spec.Taints {
			taints = append(taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
		}
		kv("Taints", strings.Join(taints, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	describeConditions(w, np.Status.Conditions, now)

	fmt.Fprintln(w, "\nMachines:")
	var mine []api.Machine
	for _, mc := range machines {
		if mc.NodePool == np.Name {
			mine = append(mine, mc)
		}
	}
	switch {
	case client.IsRouteMissing(msErr):
		fmt.Fprintf(w, "  <omitted: the server has no %s route>\n", routeMachines)
	case msErr != nil:
		fmt.Fprintf(w, "  <unavailable: %s>\n", firstLine(msErr))
	case len(mine) == 0:
		fmt.Fprintln(w, "  <none>")
	default:
		return machineTable(indent(w), false, mine, now)
	}
	return nil
}

func describeCluster(w io.Writer, now time.Time, c *api.Cluster, comps *api.ComponentList, evs []client.StreamEvent, evErr error) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, cmp.Or(v, "<none>")) }
	kv("Name", c.Name)
	describeMeta(kv, now, &c.ObjectMeta, c.Status.ObservedGeneration)
	kv("Release", c.Spec.Release.Version)
	kv("Platform", c.Spec.Platform.Type)
	kv("Availability", c.Spec.ControllerAvailabilityPolicy)
	kv("Networking", fmt.Sprintf("services %s, pods %s", cmp.Or(c.Spec.Networking.ServiceCIDR, "<default>"), cmp.Or(c.Spec.Networking.PodCIDR, "<default>")))
	if p := c.Spec.PKI; p != nil {
		kv("PKI lifetimes", fmt.Sprintf("CA %s, leaf %s", cmp.Or(p.CALifetime, "<default>"), cmp.Or(p.LeafLifetime, "<default>")))
	}
	if c.Spec.AutoNodeEnabled() {
		kv("Autoprovisioning", "Karpenter (spec.autoNode): machines for the guest's karpenter.sh NodePools, in node pool "+api.AutoNodePoolName)
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

	describeConditions(w, c.Status.Conditions, now)

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

// describeMeta writes an object's creation, deletion request and generation.
func describeMeta(kv func(k, v string), now time.Time, m *api.ObjectMeta, observed int64) {
	kv("Created", fmt.Sprintf("%s (%s ago)", m.CreationTimestamp.UTC().Format(time.RFC3339), age(m.CreationTimestamp, now)))
	if m.DeletionTimestamp != nil {
		kv("Deletion requested", fmt.Sprintf("%s (%s ago)", m.DeletionTimestamp.UTC().Format(time.RFC3339), age(*m.DeletionTimestamp, now)))
	}
	kv("Generation", fmt.Sprintf("%d (observed %d)", m.Generation, observed))
}

// describeConditions writes a Conditions section.
func describeConditions(w io.Writer, conds api.Conditions, now time.Time) {
	fmt.Fprintln(w, "\nConditions:")
	if len(conds) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	t := newTable(indent(w), "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
	for _, cond := range conds {
		t.row(cond.Type, string(cond.Status), cond.Reason, age(cond.LastTransitionTime, now), cond.Message)
	}
	t.flush()
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
