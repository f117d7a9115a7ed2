package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
)

// Output formats of -o.
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

var outputFormats = []string{OutputTable, OutputWide, OutputJSON, OutputYAML}

// addOutputFlag adds -o/--output to cmd.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", OutputTable, "output format: table, wide, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput validates -o before anything is fetched.
func checkOutput(cmd *cobra.Command, out string) error {
	if !slices.Contains(outputFormats, out) {
		return usagef(cmd, "unknown output format %q: want one of %s", out, strings.Join(outputFormats, ", "))
	}
	return nil
}

// printObject writes v as JSON or YAML; it reports false for the table formats.
func printObject(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case OutputYAML:
		y, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(y)
		return true, err
	}
	return false, nil
}

// columns is header, followed by the columns of -o wide when wide.
func columns(wide bool, header []string, wideColumns ...string) []string {
	if wide {
		return append(header, wideColumns...)
	}
	return header
}

// table writes kubectl-style columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "<none>"
		}
		cells[i] = strings.ReplaceAll(cells[i], "\t", " ")
		cells[i] = strings.ReplaceAll(cells[i], "\n", " ")
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// age formats the time since t like kubectl (5s, 3m20s, 4h, 3d).
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return humanDuration(now.Sub(t))
}

func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s % 3600) / 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*86400:
		if h := (s % 86400) / 3600; h != 0 {
			return fmt.Sprintf("%dd%dh", s/86400, h)
		}
		return fmt.Sprintf("%dd", s/86400)
	default:
		return fmt.Sprintf("%dd", s/86400)
	}
}

// condStatus is the status of the condition of type t, "Unknown" when absent.
func condStatus(cs api.Conditions, t string) string {
	if c, ok := cs.Get(t); ok {
		return string(c.Status)
	}
	return string(api.ConditionUnknown)
}

// endpointURL is https://host:port of e, or "".
func endpointURL(e *api.Endpoint) string {
	if e == nil || e.Host == "" {
		return ""
	}
	return "https://" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// clusterVersion is the newest completed release of the cluster (what `get` shows).
func clusterVersion(c *api.Cluster) string {
	if c.Status.Version == nil {
		return ""
	}
	for _, h := range c.Status.Version.History {
		if h.CompletionTime != nil {
			return h.Version
		}
	}
	return ""
}

// clusterMessage is the one line that says most about the cluster's state.
func clusterMessage(c *api.Cluster) string {
	cs := c.Status.Conditions
	for _, t := range []string{api.ConditionDeleting, api.ConditionValidConfiguration, api.ConditionDegraded} {
		if cond, ok := cs.Get(t); ok {
			bad := cond.Status == api.ConditionTrue
			if t == api.ConditionValidConfiguration {
				bad = cond.Status == api.ConditionFalse
			}
			if bad {
				return cond.Message
			}
		}
	}
	if cond, ok := cs.Get(api.ConditionAvailable); ok && cond.Status != api.ConditionTrue {
		return cond.Message
	}
	if cond, ok := cs.Get(api.ConditionProgressing); ok && cond.Status == api.ConditionTrue {
		return cond.Message
	}
	if cond, ok := cs.Get(api.ConditionAvailable); ok {
		return cond.Message
	}
	return ""
}
