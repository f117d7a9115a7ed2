package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

const routeBackups = "/v1/clusters/{c}/backups"

// backupPollInterval is how often --wait looks at a backup.
const backupPollInterval = 500 * time.Millisecond

func newCreateBackupCommand(o *Options) *cobra.Command {
	var cluster string
	cmd := action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			var b api.Backup
			if err := c.Do(cmd.Context(), http.MethodPost, client.ClusterPath(cluster, "backups"), map[string]string{"name": args[0]}, &b); err != nil {
				return step{}, notServed(err, routeBackups)
			}
			return step{said: fmt.Sprintf("backup/%s of cluster %s requested", b.Name, cluster), answer: &b,
				until: func(cx context.Context, timeout time.Duration) (string, any, error) {
					done, err := waitBackup(cx, c, cluster, b.Name, timeout)
					if err != nil {
						return "", nil, err
					}
					return fmt.Sprintf("backup/%s complete: etcd revision %d, %s", done.Name, done.Status.Revision, humanBytes(done.Status.SizeBytes)), done, nil
				}}, nil
		},
		waits:  "the backup is Complete",
		output: "print the backup as json or yaml instead of a message",
	}.command(o, &cobra.Command{
		Use:               "backup NAME --cluster CLUSTER",
		Short:             "Take an etcd backup of a cluster (a snapshot in the management plane's object store)",
		Example:           "  hostplane create backup before-upgrade --cluster demo --wait\n  hostplane create cluster demo2 --release 1.34.4 --restore-from demo/before-upgrade",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
	})
	addClusterFlag(o, cmd, &cluster, "the cluster to back up (required)")
	return cmd
}

// waitBackup polls the backup until it is complete (nil error) or failed.
func waitBackup(ctx context.Context, c *client.Client, cluster, name string, timeout time.Duration) (*api.Backup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(backupPollInterval)
	defer tick.Stop()
	var b api.Backup
	for {
		if err := c.Do(ctx, http.MethodGet, client.ClusterPath(cluster, "backups", name), nil, &b); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		cond, _ := b.Status.Conditions.Get(api.ConditionComplete)
		switch {
		case b.IsComplete():
			return &b, nil
		case b.IsFailed():
			return nil, fmt.Errorf("backup %s/%s failed: %s", cluster, name, cond.Message)
		}
		select {
		case <-ctx.Done():
			return nil, &TimeoutError{Msg: fmt.Sprintf("backup %s/%s not complete after %s: %s %s", cluster, name, timeout, cond.Reason, cond.Message)}
		case <-tick.C:
		}
	}
}

func newGetBackupsCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "backups CLUSTER [NAME]",
		Aliases:           []string{"backup"},
		Short:             "List a cluster's etcd backups, or show one",
		Args:              rangeArgs(1, 2, "CLUSTER [NAME]"),
		ValidArgsFunction: o.completeClusters,
	}
	return getter[[]api.Backup]{
		fetch: func(cx context.Context, c *client.Client, args []string) (any, []api.Backup, error) {
			if len(args) == 2 {
				var b api.Backup
				if err := c.Do(cx, http.MethodGet, client.ClusterPath(args[0], "backups", args[1]), nil, &b); err != nil {
					return nil, nil, notServed(err, routeBackups)
				}
				return &b, []api.Backup{b}, nil
			}
			var l api.BackupList
			if err := c.Do(cx, http.MethodGet, client.ClusterPath(args[0], "backups"), nil, &l); err != nil {
				return nil, nil, notServed(err, routeBackups)
			}
			return &l, l.Items, nil
		},
		table: func(s Streams, wide bool, items []api.Backup) error {
			if len(items) == 0 {
				fmt.Fprintln(s.ErrOut, "No backups found.")
				return nil
			}
			t := newTable(s.Out, columns(wide, []string{"NAME", "COMPLETE", "REVISION", "SIZE", "TRIGGER", "AGE"},
				"MEMBER", "VERSION", "MESSAGE")...)
			now := time.Now()
			for _, b := range items {
				cond, _ := b.Status.Conditions.Get(api.ConditionComplete)
				complete := string(cond.Status)
				if b.IsFailed() {
					complete = api.ReasonBackupFailed
				}
				trigger := "on-demand"
				if b.Spec.Scheduled {
					trigger = "scheduled"
				}
				rev := ""
				if b.Status.Revision > 0 {
					rev = strconv.FormatInt(b.Status.Revision, 10)
				}
				row := []string{b.Name, complete, rev, humanBytes(b.Status.SizeBytes), trigger, age(b.CreationTimestamp, now)}
				if wide {
					row = append(row, b.Status.Member, b.Status.Version, cond.Message)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}.command(o, cmd)
}

func newDeleteBackupCommand(o *Options) *cobra.Command {
	var cluster string
	cmd := action{
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			if err := c.Do(cmd.Context(), http.MethodDelete, client.ClusterPath(cluster, "backups", args[0]), nil, nil); err != nil {
				return step{}, notServed(err, routeBackups)
			}
			return step{said: fmt.Sprintf("backup/%s of cluster %s deleted", args[0], cluster)}, nil
		},
	}.command(o, &cobra.Command{
		Use:               "backup NAME --cluster CLUSTER",
		Short:             "Delete an etcd backup and its snapshot",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
	})
	addClusterFlag(o, cmd, &cluster, "the backup's cluster (required)")
	return cmd
}

func newRestoreCommand(o *Options) *cobra.Command {
	var backup string
	var cancel bool
	cmd := action{
		check: func(cmd *cobra.Command) error {
			if backup == "" && !cancel {
				return usagef(cmd, "--backup is required")
			}
			if backup != "" && cancel {
				return usagef(cmd, "--cancel takes no --backup")
			}
			return nil
		},
		do: func(cmd *cobra.Command, c *client.Client, args []string) (step, error) {
			method, path := http.MethodPost, client.ClusterPath(args[0], "backups", backup, "restore")
			said := fmt.Sprintf("cluster/%s: restore from backup %s requested", args[0], backup)
			if cancel {
				method, path = http.MethodDelete, client.ClusterPath(args[0], "restore")
				said = fmt.Sprintf("cluster/%s: in-place restore cancelled; its etcd data goes back as it was", args[0])
			}
			if err := c.Do(cmd.Context(), method, path, nil, nil); err != nil {
				return step{}, notServed(err, routeBackups)
			}
			return step{said: said, kept: true,
				until: func(cx context.Context, timeout time.Duration) (string, any, error) {
					cl, err := c.GetCluster(cx, args[0])
					if err != nil {
						return "", nil, err
					}
					return "", nil, o.wait(cx, c, availableSpec(cl.Name, cl.Generation), timeout)
				}}, nil
		},
		waits: "the cluster is Available again",
	}.command(o, &cobra.Command{
		Use:   "restore CLUSTER (--backup NAME | --cancel)",
		Short: "Restore a cluster's etcd in place from one of its backups (for lost or damaged etcd data)",
		Long: `Restore a cluster's etcd in place: the control plane is stopped, every etcd member is
restored from the backup and the control plane starts again. Everything written after the
backup is lost. A failed attempt is retried, with the data set aside kept; --cancel cancels
a pending restore and puts that data back. To restore into a new cluster instead, use
'hostplane create cluster NAME --restore-from CLUSTER/BACKUP'.`,
		Example:           "  hostplane restore demo --backup before-upgrade --wait\n  hostplane restore demo --cancel --wait",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
	})
	cmd.Flags().StringVar(&backup, "backup", "", "the backup to restore (required unless --cancel)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the cluster's pending in-place restore; the etcd data goes back as it was")
	return cmd
}

// parseRestoreFrom parses --restore-from CLUSTER/BACKUP.
func parseRestoreFrom(cmd *cobra.Command, s string) (*api.RestoreSource, error) {
	cl, b, ok := strings.Cut(s, "/")
	if !ok || cl == "" || b == "" {
		return nil, usagef(cmd, "--restore-from takes CLUSTER/BACKUP, not %q", s)
	}
	return &api.RestoreSource{Cluster: cl, Backup: b}, nil
}

// humanBytes prints a size in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	if n <= 0 {
		return ""
	}
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMG"[exp])
}
