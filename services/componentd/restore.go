package componentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/setaside"
)

// restoredMarker, in a cluster's directory, says its etcd data came from spec.restoreFrom,
// so the restore happens once, before etcd first starts.
const restoredMarker = "etcd-restored-from"

// revisionBump is added to the etcd revision by an in-place restore, with the restored
// revision marked compacted, so that clients that watched the lost data never see the
// revision go back (etcd's advice for restoring under Kubernetes).
const revisionBump = 1_000_000_000

// restoreNew restores a new cluster's etcd members from spec.restoreFrom before etcd
// first starts: once, and only into members that have no data yet.
func (d *Daemon) restoreNew(ctx context.Context, log *slog.Logger, cl *clusterState, in *component.Inputs, etcd etcdAccess) error {
	from := cl.cluster.Spec.RestoreFrom
	if from == nil {
		return nil
	}
	marker := filepath.Join(in.Dir, restoredMarker)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	var missing []int
	for n, m := range etcd.members {
		if _, err := os.Stat(m.DataDir); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, n)
		}
	}
	log = log.With("from_cluster", from.Cluster, "backup", from.Backup)
	if err := d.markEtcd(ctx, log, cl.cluster.Name, in, ReasonRestoring,
		fmt.Sprintf("restoring etcd from backup %s/%s", from.Cluster, from.Backup)); err != nil {
		return err
	}
	if err := d.restore(ctx, log, from.Cluster, from.Backup, etcd, missing, 0); err != nil {
		return d.restoreFailed(ctx, log, cl.cluster.Name, in, err)
	}
	if err := os.WriteFile(marker, []byte(from.Cluster+"/"+from.Backup+"\n"), 0o600); err != nil {
		return err
	}
	log.Info("etcd restored from backup into a new cluster", "members", len(missing))
	return d.announceRestore(ctx, cl.cluster.Name, from.Cluster, from.Backup, false)
}

// restoreMarker, in a cluster's directory, records an in-place restore under way
// (internal/setaside): the request it carries out and which members had data when it began.
const restoreMarker = "etcd-restore-in-progress"

// restoreInPlace carries out a restore request of POST .../backups/{b}/restore: it stops
// the cluster's control plane (dependents first), sets the etcd data aside
// (etcd-<n>.before-restore), restores every member and removes the request; the converge
// that follows starts the control plane again in dependency order. A failed attempt is
// retried with the data set aside untouched; a request cancelled meanwhile
// (DELETE .../restore) puts that data back (rollbackRestore), so the cluster's etcd is then
// exactly as it was before the first attempt.
func (d *Daemon) restoreInPlace(ctx context.Context, log *slog.Logger, cl *clusterState, in *component.Inputs, etcd etcdAccess) error {
	name := cl.cluster.Name
	req, rev, err := getOptional(ctx, d.restores, restoreKey(name))
	if err != nil {
		return err
	}
	marker := filepath.Join(in.Dir, restoreMarker)
	progress, err := setaside.Read(marker)
	if err != nil {
		return err
	}
	if progress != nil && (req == nil || progress.Request != req.id()) {
		// A restore whose request is gone: cancelled before it finished, or finished.
		if err := d.rollbackRestore(ctx, log, name, in, etcd, marker, progress); err != nil {
			return err
		}
		progress = nil
	}
	if req == nil {
		return nil
	}
	log = log.With("backup", req.Backup, "in_place", true)
	attempt := fmt.Sprintf("in-place restore from backup %s/%s (attempt %d)", name, req.Backup, req.Attempts+1)
	step := func(msg string) error {
		return d.markEtcd(ctx, log, name, in, ReasonRestoring, attempt+": "+msg)
	}
	if progress == nil || !progress.Done {
		if err := step("stopping the control plane"); err != nil {
			return err
		}
		if _, err := d.proc.Stop(ctx, name); err != nil {
			return err
		}
		if err := step("setting each etcd member's data aside"); err != nil {
			return err
		}
		if progress, err = setaside.Begin(marker, etcd.dataDirs(), req.id(), progress); err != nil {
			return d.failAttempt(ctx, log, name, in, req, rev, attempt, fmt.Errorf("set the etcd data aside: %w", err))
		}
		if err := step("fetching the snapshot and restoring every member"); err != nil {
			return err
		}
		all := make([]int, len(etcd.members))
		for n := range etcd.members {
			all[n] = n
		}
		if err := d.restore(ctx, log, name, req.Backup, etcd, all, revisionBump); err != nil {
			return d.failAttempt(ctx, log, name, in, req, rev, attempt, err)
		}
		progress.Done = true
		if err := setaside.Write(marker, progress); err != nil {
			return err
		}
	}
	if err := d.restores.Delete(ctx, restoreKey(name), rev); err != nil {
		return err // cancelled meanwhile (or replaced): the next reconcile decides
	}
	// Announced before the marker goes: a crash in between announces it again (at least
	// once), never not at all (rollbackRestore of a Done marker).
	if err := d.announceRestore(ctx, name, name, req.Backup, true); err != nil {
		return err
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := step("restored; starting the control plane again"); err != nil {
		return err
	}
	log.Info("etcd restored in place; starting the control plane again")
	return nil
}

// rollbackRestore ends a restore whose request is gone. One that finished (Done) is
// announced (backup.restored) and loses its marker. One cancelled before it finished puts back the data it set aside: each
// member gets its data back, or none if it had none.
func (d *Daemon) rollbackRestore(ctx context.Context, log *slog.Logger, name string, in *component.Inputs, etcd etcdAccess, marker string, progress *setaside.Progress) error {
	if progress.Done {
		// Every member was restored before the request went (a crash after removing it, or a
		// cancel that came too late): the restore happened, and is announced.
		backup, _, _ := strings.Cut(progress.Request, "@")
		if err := d.announceRestore(ctx, name, name, backup, true); err != nil {
			return err
		}
		log.Info("in-place restore finished before its request went; announced it", "request", progress.Request)
		return os.Remove(marker)
	}
	if err := d.markEtcd(ctx, log, name, in, ReasonRestoreCancelled,
		"in-place restore cancelled: stopping the control plane and putting the etcd data back as it was"); err != nil {
		return err
	}
	if _, err := d.proc.Stop(ctx, name); err != nil {
		return err
	}
	if err := setaside.PutBack(etcd.dataDirs(), progress); err != nil {
		return err
	}
	if err := os.Remove(marker); err != nil {
		return err
	}
	log.Info("in-place restore cancelled; the etcd data is back as it was", "request", progress.Request)
	return nil
}

// failAttempt counts a failed attempt in the request and records it on the etcd component;
// the reconcile retries with backoff, the data set aside stays where it is.
func (d *Daemon) failAttempt(ctx context.Context, log *slog.Logger, name string, in *component.Inputs, req *restoreRequest, rev uint64, attempt string, cause error) error {
	next := *req
	next.Attempts++
	if _, err := d.restores.Update(ctx, restoreKey(name), &next, rev); err != nil {
		return errors.Join(cause, err)
	}
	return d.restoreFailed(ctx, log, name, in, fmt.Errorf("%s failed, retrying; the data set aside is kept (DELETE /v1/clusters/%s/restore cancels and puts it back): %w", attempt, name, cause))
}

// restore fetches the backup's snapshot, checks its checksum and restores it into the data
// directories of the members numbered in members (each through a temporary directory, so
// a crash leaves no half-restored member).
func (d *Daemon) restore(ctx context.Context, log *slog.Logger, cluster, backup string, etcd etcdAccess, members []int, bump uint64) error {
	if len(members) == 0 {
		return nil
	}
	b, _, err := d.backups.Get(ctx, api.BackupKey(cluster, backup))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("cluster %q has no backup %q", cluster, backup)
	case err != nil:
		return err
	case !b.IsComplete():
		return fmt.Errorf("backup %s/%s is not complete", cluster, backup)
	}
	dir, err := d.backupsDir()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "restore-"+cluster+"-"+backup+".db")
	_ = os.Remove(path)
	defer func() { _ = os.Remove(path) }()
	if err := d.snapshots.GetFile(ctx, api.SnapshotObject(cluster, backup), path); err != nil {
		return fmt.Errorf("fetch snapshot %s from %s: %w", api.SnapshotObject(cluster, backup), d.snapshots, err)
	}
	sum, _, err := fileSHA256(path)
	if err != nil {
		return err
	}
	if sum != b.Status.SHA256 {
		return fmt.Errorf("snapshot %s/%s is corrupt: sha256 %s, recorded %s", cluster, backup, sum, b.Status.SHA256)
	}
	mgr := snapshot.NewV3(zap.NewNop())
	for _, n := range members {
		m := etcd.members[n]
		tmp := m.DataDir + ".restoring"
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		err := mgr.Restore(snapshot.RestoreConfig{
			SnapshotPath:        path,
			Name:                m.Name,
			OutputDataDir:       tmp,
			PeerURLs:            []string{m.PeerURL},
			InitialCluster:      etcd.initialCluster,
			InitialClusterToken: etcd.cluster,
			RevisionBump:        bump,
			MarkCompacted:       bump > 0,
		})
		if err != nil {
			return fmt.Errorf("restore etcd member %s: %w", m.Name, err)
		}
		if err := os.Rename(tmp, m.DataDir); err != nil {
			return err
		}
		log.Info("etcd member restored", "member", m.Name, "revision", b.Status.Revision, "revision_bump", strconv.FormatUint(bump, 10))
	}
	return nil
}

// restoreFailed records the failure on the etcd component and returns it (the reconcile
// retries with backoff).
func (d *Daemon) restoreFailed(ctx context.Context, log *slog.Logger, cluster string, in *component.Inputs, err error) error {
	log.Warn("etcd restore failed", "err", err)
	if rerr := d.markEtcd(ctx, log, cluster, in, ReasonRestoreFailed, err.Error()); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// markEtcd records the etcd component as not available for reason.
func (d *Daemon) markEtcd(ctx context.Context, log *slog.Logger, cluster string, in *component.Inputs, reason, msg string) error {
	comp, err := component.Lookup(api.ComponentEtcd)
	if err != nil {
		return err
	}
	byName, err := d.records(ctx, cluster)
	if err != nil {
		return err
	}
	_, err = d.recordDown(ctx, log, cluster, comp, in, byName[api.ComponentEtcd], reason, msg, false)
	return err
}

// announceRestore publishes backup.restored for the restored cluster.
func (d *Daemon) announceRestore(ctx context.Context, cluster, fromCluster, backup string, inPlace bool) error {
	data := map[string]any{"cluster": fromCluster, "backup": backup, "inPlace": inPlace}
	sent, err := d.rt.Outbox.Record(ctx, cluster, events.ResourceBackup, events.VerbBackupRestored, cluster, data)
	if err != nil {
		return err
	}
	d.rt.Outbox.Send(ctx, sent)
	return nil
}
