package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/events"
)

// routeEvents is the SSE route of a cluster's events.
const routeEvents = "/v1/clusters/{c}/events"

func newEventsCommand(o *Options) *cobra.Command {
	var (
		follow bool
		since  time.Duration
		out    string
	)
	cmd := &cobra.Command{
		Use:   "events CLUSTER [-f]",
		Short: "Show a cluster's recent events, or follow them as they happen",
		Long: `Show the cluster's CloudEvents (cluster, component, pki, infra, nodepool, machine changes)
from the server's Server-Sent Events stream GET ` + routeEvents + `.

With -f it keeps following, reconnecting after a dropped connection and resuming after
the last event it printed (Last-Event-ID). Lines are TIME TYPE SUBJECT; -o json prints
each CloudEvent as one JSON line.`,
		Example: `  hostplane events demo
  hostplane events -f demo
  hostplane events -f demo -o json | jq .type`,
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out != OutputTable && out != OutputJSON {
				return usagef(cmd, "unknown output format %q: want table or json", out)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			cluster := args[0]
			var start time.Time
			if since > 0 {
				start = time.Now().Add(-since)
			}
			print := eventPrinter(o, out)
			if !follow {
				evs, err := recentEvents(cmd.Context(), c, cluster, start, 0)
				if err != nil {
					return notServed(err, routeEvents)
				}
				if len(evs) == 0 {
					fmt.Fprintln(o.ErrOut, "No events found.")
				}
				for _, ev := range evs {
					if err := print(ev); err != nil {
						return err
					}
				}
				return nil
			}
			opts := client.FollowOptions{
				StreamOptions: client.StreamOptions{Since: start},
				OnDisconnect: func(err error, wait time.Duration) {
					reason := "the server closed the stream"
					if err != nil && !errors.Is(err, io.EOF) {
						reason = firstLine(err)
					}
					fmt.Fprintf(o.ErrOut, "# disconnected (%s); reconnecting in %s\n", reason, wait)
				},
			}
			err = c.Follow(cmd.Context(), cluster, opts, print)
			return notServed(err, routeEvents)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep following new events until interrupted")
	cmd.Flags().DurationVar(&since, "since", time.Hour, "start with the events of this last period (0: only new ones)")
	cmd.Flags().StringVarP(&out, "output", "o", OutputTable, "output format: table (TIME TYPE SUBJECT) or json (one CloudEvent per line)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputTable, OutputJSON}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventPrinter prints one event per line.
func eventPrinter(o *Options, format string) func(client.StreamEvent) error {
	return func(ev client.StreamEvent) error {
		if format == OutputJSON {
			if len(ev.Data) > 0 && json.Valid(ev.Data) {
				var buf bytes.Buffer
				if err := json.Compact(&buf, ev.Data); err == nil {
					_, err := fmt.Fprintln(o.Out, buf.String())
					return err
				}
			}
			_, err := fmt.Fprintln(o.Out, string(ev.Data))
			return err
		}
		_, err := fmt.Fprintln(o.Out, eventLine(ev))
		return err
	}
}

// eventLine is "TIME TYPE SUBJECT".
func eventLine(ev client.StreamEvent) string {
	e := ev.Event
	if e.Type == "" {
		return fmt.Sprintf("%s %s %s", time.Now().UTC().Format(time.RFC3339), ev.Name, strings.TrimSpace(string(ev.Data)))
	}
	return fmt.Sprintf("%s %s %s", e.Time.UTC().Format(time.RFC3339), shortType(e.Type), cmp.Or(e.Subject, "-"))
}

// shortType drops the io.hostplane. prefix: "cluster.created".
func shortType(t string) string { return strings.TrimPrefix(t, events.TypePrefix) }

// recentIdle is how long recentEvents waits for another event before it takes the replay as
// complete.
const recentIdle = 750 * time.Millisecond

// recentEvents reads the cluster's events since start (zero: the server's default) until the
// stream falls idle, keeping the last n (0: all).
func recentEvents(ctx context.Context, c *client.Client, cluster string, start time.Time, n int) ([]client.StreamEvent, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Events(rctx, cluster, client.StreamOptions{Since: start})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	type result struct {
		ev  client.StreamEvent
		err error
	}
	ch := make(chan result)
	go func() {
		defer close(ch)
		for {
			ev, err := s.Next()
			select {
			case ch <- result{ev, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var evs []client.StreamEvent
	idle := time.NewTimer(2 * recentIdle)
	defer idle.Stop()
	for {
		select {
		case r, ok := <-ch:
			if !ok || r.err != nil {
				if r.err != nil && !errors.Is(r.err, io.EOF) && ctx.Err() == nil {
					return evs, r.err
				}
				return keepLast(evs, n), nil
			}
			evs = append(evs, r.ev)
			idle.Reset(recentIdle)
		case <-idle.C:
			cancel()
			s.Close()
			for range ch { // let the reader goroutine end
			}
			return keepLast(evs, n), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func keepLast(evs []client.StreamEvent, n int) []client.StreamEvent {
	if n > 0 && len(evs) > n {
		return evs[len(evs)-n:]
	}
	return evs
}
