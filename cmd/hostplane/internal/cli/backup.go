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
	var (
		cluster, out string
		wait         bool
		timeout      time.Duration
	)
	cmd := &cobra.Command{
		Use:               "backup NAME --cluster CLUSTER",
		Short:             "Take an etcd backup of a cluster (a snapshot in the management plane's object store)",
		Example:           "  hostplane create backup before-upgrade --cluster demo --wait\n  hostplane create cluster demo2 --release 1.34.4 --restore-from demo/before-upgrade",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out != "" {
				if err := checkOutput(cmd, out); err != nil {
					return err
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var b api.Backup
			if err := c.Do(ctx(cmd), http.MethodPost, client.ClusterPath(cluster, "backups"), map[string]string{"name": args[0]}, &b); err != nil {
				return notServed(err, routeBackups)
			}
			if !wait {
				return printResult(o, out, &b, "backup/%s of cluster %s requested", b.Name, cluster)
			}
			fmt.Fprintf(o.ErrOut, "backup/%s of cluster %s requested\n", b.Name, cluster)
			done, err := waitBackup(ctx(cmd), c, cluster, b.Name, timeout)
			if err != nil {
				return err
			}
			return printResult(o, out, done, "backup/%s complete: etcd revision %d, %s", done.Name, done.Status.Revision, humanBytes(done.Status.SizeBytes))
		},
	}
	addClusterFlag(o, cmd, &cluster, "the cluster to back up (required)")
	addWaitFlags(cmd, &wait, &timeout, "the backup is Complete")
	cmd.Flags().StringVarP(&out, "output", "o", "", "print the backup as json or yaml instead of a message")
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
			header := []string{"NAME", "COMPLETE", "REVISION", "SIZE", "TRIGGER", "AGE"}
			if wide {
				header = append(header, "MEMBER", "VERSION", "MESSAGE")
			}
			t := newTable(s.Out, header...)
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
	cmd := &cobra.Command{
		Use:               "backup NAME --cluster CLUSTER",
		Short:             "Delete an etcd backup and its snapshot",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.Do(ctx(cmd), http.MethodDelete, client.ClusterPath(cluster, "backups", args[0]), nil, nil); err != nil {
				return notServed(err, routeBackups)
			}
			fmt.Fprintf(o.Out, "backup/%s of cluster %s deleted\n", args[0], cluster)
			return nil
		},
	}
	addClusterFlag(o, cmd, &cluster, "the backup's cluster (required)")
	return cmd
}

func newRestoreCommand(o *Options) *cobra.Command {
	var (
		backup  string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "restore CLUSTER --backup NAME",
		Short: "Restore a cluster's etcd in place from one of its backups (for lost or damaged etcd data)",
		Long: `Restore a cluster's etcd in place: the control plane is stopped, every etcd member is
restored from the backup and the control plane starts again. Everything written after the
backup is lost. To restore into a new cluster instead, use
'hostplane create cluster NAME --restore-from CLUSTER/BACKUP'.`,
		Example:           "  hostplane restore demo --backup before-upgrade --wait",
		Args:              exactArgs("CLUSTER"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			if backup == "" {
				return usagef(cmd, "--backup is required")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.Do(ctx(cmd), http.MethodPost, client.ClusterPath(args[0], "backups", backup, "restore"), nil, nil); err != nil {
				return notServed(err, routeBackups)
			}
			fmt.Fprintf(o.Out, "cluster/%s: restore from backup %s requested\n", args[0], backup)
			if !wait {
				return nil
			}
			cl, err := c.GetCluster(ctx(cmd), args[0])
			if err != nil {
				return err
			}
			return o.wait(ctx(cmd), c, availableSpec(cl.Name, cl.Generation), timeout)
		},
	}
	cmd.Flags().StringVar(&backup, "backup", "", "the backup to restore (required)")
	addWaitFlags(cmd, &wait, &timeout, "the cluster is Available again")
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
