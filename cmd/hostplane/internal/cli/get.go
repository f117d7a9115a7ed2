package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

func newGetCommand(o *Options) *cobra.Command {
	cmd := group("get", "Show clusters, components, PKI, infrastructure, node pools, machines, releases or audit events",
		newGetClustersCommand(o), newGetComponentsCommand(o), newGetPKICommand(o), newGetInfraCommand(o), newGetNodePoolsCommand(o),
		newGetMachinesCommand(o), newGetReleasesCommand(o), newGetAuditCommand(o), newGetBackupsCommand(o))
	cmd.Long = `Show one or many resources.

Resources: clusters (cluster), components CLUSTER, pki CLUSTER, infra CLUSTER,
nodepools CLUSTER, machines CLUSTER, releases, audit CLUSTER, backups CLUSTER.`
	cmd.Example = `  hostplane get clusters
  hostplane get cluster demo -o yaml
  hostplane get components demo -o wide`
	return cmd
}

// getter is what a read command does its own way: how it fetches what it shows and how its
// table looks. Its command does the rest as every read command does: check -o, print the
// server's answer as json or yaml when asked, or else the table.
type getter[T any] struct {
	// check, when set, validates the command's other flags once -o is known good, before any
	// request.
	check func(cmd *cobra.Command) error
	// fetch asks the server: answer is what -o json and -o yaml print, rows what the table shows.
	fetch func(ctx context.Context, c *client.Client, args []string) (answer any, rows T, err error)
	// table prints rows to s.Out (or says on s.ErrOut that there are none); wide adds the
	// columns of -o wide.
	table func(s Streams, wide bool, rows T) error
}

// command completes cmd, which has its use, help, arguments and completion, with the run
// and the -o flag of a read command.
func (g getter[T]) command(o *Options, cmd *cobra.Command) *cobra.Command {
	var out string
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(cmd, out); err != nil {
			return err
		}
		if g.check != nil {
			if err := g.check(cmd); err != nil {
				return err
			}
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		answer, rows, err := g.fetch(cmd.Context(), c, args)
		if err != nil {
			return err
		}
		if ok, err := printObject(o.Out, out, answer); ok {
			return err
		}
		return g.table(o.Streams, out == OutputWide, rows)
	}
	addOutputFlag(cmd, &out)
	return cmd
}

func newGetClustersCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "clusters [NAME]",
		Aliases:           []string{"cluster", "hostedclusters", "hostedcluster", "hc"},
		Short:             "List clusters, or show one",
		Args:              rangeArgs(0, 1, "[NAME]"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[[]api.Cluster]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, []api.Cluster, error) {
			if len(args) == 1 {
				cl, err := c.GetCluster(cx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return cl, []api.Cluster{*cl}, nil
			}
			l, err := c.ListClusters(cx)
			if err != nil {
				return nil, nil, err
			}
			return l, l.Items, nil
		},
		table: printClusters,
	}.command(o, cmd)
}

func printClusters(s Streams, wide bool, items []api.Cluster) error {
	if len(items) == 0 {
		fmt.Fprintln(s.ErrOut, "No clusters found.")
		return nil
	}
	t := newTable(s.Out, columns(wide, []string{"NAME", "VERSION", "AVAILABLE", "PROGRESSING", "AGE"}, "ENDPOINT", "MESSAGE")...)
	now := time.Now()
	for i := range items {
		c := &items[i]
		row := []string{c.Name, clusterVersion(c), condStatus(c.Status.Conditions, api.ConditionAvailable),
			condStatus(c.Status.Conditions, api.ConditionProgressing), age(c.CreationTimestamp, now)}
		if wide {
			row = append(row, endpointURL(c.Status.ControlPlaneEndpoint), clusterMessage(c))
		}
		t.row(row...)
	}
	return t.flush()
}

func newGetComponentsCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "components CLUSTER",
		Aliases:           []string{"component", "comp"},
		Short:             "List a cluster's control-plane components",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[[]api.ControlPlaneComponent]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, []api.ControlPlaneComponent, error) {
			l, err := components(cx, c, args[0])
			if err != nil {
				return nil, nil, err
			}
			return l, l.Items, nil
		},
		table: printComponents,
	}.command(o, cmd)
}

// components lists the cluster's components; a cluster that exists but has none yet is an
// empty list, a cluster that does not exist is a not-found error.
func components(ctx context.Context, c *client.Client, cluster string) (*api.ComponentList, error) {
	l, err := c.Components(ctx, cluster)
	if client.IsNotFound(err) {
		if _, gerr := c.GetCluster(ctx, cluster); gerr != nil {
			return nil, gerr
		}
		return &api.ComponentList{Items: []api.ControlPlaneComponent{}}, nil
	}
	return l, err
}

func printComponents(s Streams, wide bool, items []api.ControlPlaneComponent) error {
	if len(items) == 0 {
		fmt.Fprintln(s.ErrOut, "No components found.")
		return nil
	}
	t := newTable(s.Out, columns(wide, []string{"NAME", "VERSION", "READY", "AVAILABLE", "PROGRESSING", "AGE"},
		"DEPENDS-ON", "CONFIG", "RESTARTS", "MESSAGE")...)
	now := time.Now()
	for _, c := range items {
		row := []string{c.Name, c.Status.Version, fmt.Sprintf("%d/%d", c.Status.ReadyReplicas, c.Spec.Replicas),
			condStatus(c.Status.Conditions, api.ConditionAvailable), componentProgressing(&c), age(c.CreationTimestamp, now)}
		if wide {
			restarts := 0
			for _, r := range c.Status.Replicas {
				restarts += r.Restarts
			}
			row = append(row, strings.Join(c.Spec.DependsOn, ","), shortHash(c.Spec.ConfigHash), strconv.Itoa(restarts), componentMessage(&c))
		}
		t.row(row...)
	}
	return t.flush()
}

// componentProgressing is "True" while a rollout is under way (RolloutComplete False).
func componentProgressing(c *api.ControlPlaneComponent) string {
	rc, ok := c.Status.Conditions.Get(api.ConditionRolloutComplete)
	switch {
	case !ok:
		return string(api.ConditionUnknown)
	case rc.Status == api.ConditionTrue:
		return string(api.ConditionFalse)
	case rc.Status == api.ConditionFalse:
		return string(api.ConditionTrue)
	}
	return string(api.ConditionUnknown)
}

func componentMessage(c *api.ControlPlaneComponent) string {
	cs := c.Status.Conditions
	if d, ok := cs.Get(api.ConditionDegraded); ok && d.Status == api.ConditionTrue {
		return d.Message
	}
	if a, ok := cs.Get(api.ConditionAvailable); ok && a.Status != api.ConditionTrue {
		return a.Message
	}
	if r, ok := cs.Get(api.ConditionRolloutComplete); ok {
		return r.Message
	}
	return ""
}

func shortHash(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

func newGetPKICommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "pki CLUSTER",
		Aliases:           []string{"certificates", "certs"},
		Short:             "List a cluster's certificates and their expiry (never key material)",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[[]api.CertInfo]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, []api.CertInfo, error) {
			p, err := c.PKI(cx, args[0])
			if err != nil {
				return nil, nil, err
			}
			return p, p.Certificates, nil
		},
		table: func(s Streams, wide bool, certs []api.CertInfo) error {
			t := newTable(s.Out, columns(wide, []string{"NAME", "CA", "NOT-AFTER", "EXPIRES-IN"}, "SUBJECT", "ISSUER")...)
			now := time.Now()
			for _, ci := range certs {
				row := []string{ci.Name, strconv.FormatBool(ci.IsCA), ci.NotAfter.UTC().Format(time.RFC3339), humanDuration(ci.NotAfter.Sub(now))}
				if wide {
					row = append(row, ci.Subject, ci.Issuer)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}.command(o, cmd)
}

func newGetInfraCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "infra CLUSTER",
		Aliases:           []string{"infrastructure"},
		Short:             "Show what infrad allocated for a cluster: endpoint and ports",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[*api.Infra]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, *api.Infra, error) {
			inf, err := c.Infra(cx, args[0])
			if err != nil {
				return nil, nil, err
			}
			return inf, inf, nil
		},
		table: func(s Streams, wide bool, inf *api.Infra) error {
			t := newTable(s.Out, columns(wide, []string{"CLUSTER", "PLATFORM", "ENDPOINT", "READY", "AGE"},
				"APISERVERS", "ETCD", "MESSAGE")...)
			row := []string{inf.Name, inf.Platform, endpointURL(&inf.Endpoint), strconv.FormatBool(inf.Ready), age(inf.CreationTimestamp, time.Now())}
			if wide {
				var apis, etcd []string
				for _, e := range inf.APIServers {
					apis = append(apis, net.JoinHostPort(e.Host, strconv.Itoa(e.Port)))
				}
				for _, m := range inf.Etcd {
					etcd = append(etcd, net.JoinHostPort(m.Host, strconv.Itoa(m.ClientPort)))
				}
				row = append(row, strings.Join(apis, ","), strings.Join(etcd, ","), inf.Message)
			}
			t.row(row...)
			return t.flush()
		},
	}.command(o, cmd)
}

// notServed turns "the server has no route" into a message saying the feature is not there
// yet; other errors pass through.
func notServed(err error, route string) error {
	if client.IsRouteMissing(err) {
		return fmt.Errorf("not available yet: the server has no %s route", route)
	}
	return err
}

// nodePoolAnswer is the server's answer to get nodepools, as it came (what the json and yaml
// outputs print): one pool when NAME was given, else the list.
type nodePoolAnswer struct {
	raw json.RawMessage
	one bool
}

const (
	routeNodePools = "/v1/clusters/{c}/nodepools"
	routeMachines  = "/v1/clusters/{c}/machines"
)

func newGetNodePoolsCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "nodepools CLUSTER [NAME]",
		Aliases:           []string{"nodepool", "np"},
		Short:             "List a cluster's node pools, or show one",
		Args:              rangeArgs(1, 2, "CLUSTER [NAME]"),
		ValidArgsFunction: o.completeClusterThenNodePool,
	}
	return getter[nodePoolAnswer]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, nodePoolAnswer, error) {
			path := client.ClusterPath(args[0], "nodepools")
			if len(args) == 2 {
				path = client.ClusterPath(args[0], "nodepools", args[1])
			}
			var raw json.RawMessage
			if err := c.Do(cx, http.MethodGet, path, nil, &raw); err != nil {
				return nil, nodePoolAnswer{}, notServed(err, routeNodePools)
			}
			return raw, nodePoolAnswer{raw: raw, one: len(args) == 2}, nil
		},
		table: func(s Streams, wide bool, pools nodePoolAnswer) error {
			var items []api.NodePool
			if pools.one {
				var np api.NodePool
				if err := json.Unmarshal(pools.raw, &np); err != nil {
					return err
				}
				items = []api.NodePool{np}
			} else {
				var l api.NodePoolList
				if err := json.Unmarshal(pools.raw, &l); err != nil {
					return err
				}
				items = l.Items
			}
			if len(items) == 0 {
				fmt.Fprintln(s.ErrOut, "No node pools found.")
				return nil
			}
			t := newTable(s.Out, columns(wide, []string{"NAME", "DESIRED", "CURRENT", "READY", "VERSION", "AGE"},
				"UPGRADE-TYPE", "AUTOSCALING", "MESSAGE")...)
			now := time.Now()
			for _, np := range items {
				desired := ""
				if np.Spec.Replicas != nil {
					desired = strconv.Itoa(int(*np.Spec.Replicas))
				}
				row := []string{np.Name, desired, strconv.Itoa(int(np.Status.Replicas)), strconv.Itoa(int(np.Status.ReadyReplicas)),
					np.Status.Version, age(np.CreationTimestamp, now)}
				if wide {
					as := ""
					if a := np.Spec.AutoScaling; a != nil {
						as = fmt.Sprintf("%d-%d", a.Min, a.Max)
					}
					msg := ""
					if r, ok := np.Status.Conditions.Get("Ready"); ok {
						msg = r.Message
					}
					row = append(row, np.Spec.Management.UpgradeType, as, msg)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}.command(o, cmd)
}

func newGetMachinesCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "machines CLUSTER",
		Aliases:           []string{"machine", "ma"},
		Short:             "List a cluster's worker machines",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[json.RawMessage]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, json.RawMessage, error) {
			var raw json.RawMessage
			if err := c.Do(cx, http.MethodGet, client.ClusterPath(args[0], "machines"), nil, &raw); err != nil {
				return nil, nil, notServed(err, routeMachines)
			}
			return raw, raw, nil
		},
		table: func(s Streams, wide bool, raw json.RawMessage) error {
			var l api.MachineList
			if err := json.Unmarshal(raw, &l); err != nil {
				return err
			}
			if len(l.Items) == 0 {
				fmt.Fprintln(s.ErrOut, "No machines found.")
				return nil
			}
			return machineTable(s.Out, wide, l.Items, time.Now())
		},
	}.command(o, cmd)
}

// machineTable prints machines as NAME NODEPOOL PHASE NODE TYPE ZONE VERSION AGE (TYPE and
// ZONE: the local instance type and zone); wide adds MACHINE (simulated on platform local, a
// container on docker), CAPACITY (on-demand or spot), NODECLAIM (Karpenter's, if any),
// PROVIDER-ID, CONFIG-HASH and MESSAGE (the fault injected, if any, before the message).
// machineKind says plainly what a machine of platform is.
func machineKind(platform string) string {
	switch platform {
	case api.PlatformLocal:
		return "simulated"
	case api.PlatformDocker:
		return "container"
	}
	return platform
}

func machineTable(w io.Writer, wide bool, ms []api.Machine, now time.Time) error {
	t := newTable(w, columns(wide, []string{"NAME", "NODEPOOL", "PHASE", "NODE", "TYPE", "ZONE", "VERSION", "AGE"},
		"MACHINE", "CAPACITY", "NODECLAIM", "PROVIDER-ID", "CONFIG-HASH", "MESSAGE")...)
	for _, m := range ms {
		row := []string{m.Name, m.NodePool, m.Phase, m.NodeName, m.InstanceType, m.Zone, m.Version, age(m.CreatedAt, now)}
		if wide {
			msg := m.Message
			if m.Fault != "" {
				msg = strings.TrimSpace("fault " + m.Fault + ": " + msg)
			}
			row = append(row, machineKind(m.Platform), m.CapacityType, m.NodeClaim, m.ProviderID, m.ConfigHash, msg)
		}
		t.row(row...)
	}
	return t.flush()
}
