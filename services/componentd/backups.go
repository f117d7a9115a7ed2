package componentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/robfig/cron/v3"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
)

// Backups (docs/backups.md). componentd owns them because it runs etcd and holds its client
// certificate. The records are in the bucket "backups" (key "<cluster>.<backup>"), the
// snapshots in the object store "etcd-snapshots" or an S3-compatible store
// (Config.BackupStoreURL; object "<cluster>/<backup>"). Taking a
// snapshot, the schedule, retention and restores all run in the cluster's reconcile, so
// they never overlap with each other or with a rollout of the same cluster.

// restoreRequest asks for a cluster's etcd to be restored in place from one of its backups
// (key restoreKey(cluster) in the backups bucket; no backup name can clash with it).
type restoreRequest struct {
	Backup      string    `json:"backup"`
	RequestedAt time.Time `json:"requestedAt"`
	// Attempts counts the attempts that failed (each is retried with backoff).
	Attempts int `json:"attempts,omitempty"`
}

// id tells one request from any later one (a retry updates the record, not its id).
func (r *restoreRequest) id() string {
	return r.Backup + "@" + r.RequestedAt.Format(time.RFC3339Nano)
}

func restoreKey(cluster string) string { return "_restore." + cluster }

// backupKeys are the guest's Secret encryption keys when a backup was taken (sealed, as in
// the pki bucket; key keysKey(cluster, backup) of the backups bucket, never served by the
// API): a cluster restored from the backup gets them as extra decryption keys, so the
// Secrets of the backup stay readable.
type backupKeys struct {
	Keys []api.EncryptionKey `json:"keys"`
}

func keysKey(cluster, backup string) string { return "_keys." + cluster + "." + backup }

// Event verbs of backups componentd publishes through saveBackup (resource "backup", key
// "<cluster>/<backup>"); backup.deleted and backup.restored have their own call sites.
const (
	VerbBackupCreated   = events.VerbBackupCreated
	VerbBackupCompleted = events.VerbBackupCompleted
	VerbBackupFailed    = events.VerbBackupFailed
)

// scheduledPrefix starts the names of the backups the schedule takes.
const scheduledPrefix = "scheduled-"

// Reasons of the etcd component while a restore runs.
const (
	ReasonRestoring     = "RestoringFromBackup"
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonRestoreCancelled: the request was cancelled; the data set aside is put back.
	ReasonRestoreCancelled = "RestoreCancelled"
)

// backupsSupported refuses backups under the kubernetes runtime: its etcd runs in pods
// componentd cannot reach without a kubelet (docs/backups.md).
func (d *Daemon) backupsSupported() error {
	if d.cfg.Runtime == RuntimeKubernetes {
		return api.Errorf(api.CodeConflict, "etcd backups and restores need the process runtime; this componentd runs the kubernetes runtime (see docs/backups.md)")
	}
	return nil
}

func backupParam(r *http.Request) (cluster, backup string, err error) {
	if cluster, err = clusterParam(r); err != nil {
		return "", "", err
	}
	backup = chi.URLParam(r, "backup")
	if api.ValidateBackupName(backup) != nil {
		return "", "", api.Errorf(api.CodeNotFound, "cluster %q has no backup %q", cluster, backup)
	}
	return cluster, backup, nil
}

// liveCluster returns the cluster, or NotFound, or Conflict while it is being deleted.
func (d *Daemon) liveCluster(ctx context.Context, name string) (*api.Cluster, error) {
	c, _, err := d.clusters.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, api.Errorf(api.CodeNotFound, "cluster %q not found", name)
	case err != nil:
		return nil, err
	case c.DeletionTimestamp != nil:
		return nil, api.Errorf(api.CodeConflict, "cluster %q is being deleted", name)
	}
	return c, nil
}

// createBackup answers POST /v1/clusters/{cluster}/backups {"name": …} with 202 and the new
// backup (Complete False, InProgress); the cluster's reconcile takes the snapshot.
func (d *Daemon) createBackup(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	var in api.Backup
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if err := api.ValidateBackupName(in.Name); err != nil {
		var fe api.FieldErrors
		fe.Add("name", "%s", err)
		return fe.Err()
	}
	if err := d.backupsSupported(); err != nil {
		return err
	}
	ctx := r.Context()
	c, err := d.liveCluster(ctx, cluster)
	if err != nil {
		return err
	}
	if err := d.backupQuota(ctx, cluster); err != nil {
		return err
	}
	b, err := d.newBackup(ctx, c, in.Name, false)
	if errors.Is(err, store.ErrExists) {
		return api.Errorf(api.CodeConflict, "cluster %q already has a backup %q", cluster, in.Name)
	}
	if err != nil {
		return err
	}
	d.enqueue(cluster)
	httpapi.WriteJSON(w, http.StatusAccepted, b)
	return nil
}

// backupQuota refuses an on-demand backup of a cluster that holds Config.MaxBackupsPerCluster
// of them already (two requests at once may both pass: it bounds, it does not count exactly).
func (d *Daemon) backupQuota(ctx context.Context, cluster string) error {
	entries, err := d.clusterBackups(ctx, cluster)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if !e.Value.Spec.Scheduled {
			n++
		}
	}
	if n >= d.cfg.MaxBackupsPerCluster {
		return api.Errorf(api.CodeConflict, "cluster %q holds %d on-demand backups, the most it may (componentd --max-backups-per-cluster %d): delete one first",
			cluster, n, d.cfg.MaxBackupsPerCluster)
	}
	return nil
}

// newBackup stores a backup to take (publishing backup.created).
func (d *Daemon) newBackup(ctx context.Context, c *api.Cluster, name string, scheduled bool) (*api.Backup, error) {
	now := d.cfg.Clock.Now().UTC() // the schedule's clock: the next scheduled backup is due after this one's creation
	b := &api.Backup{
		ObjectMeta: api.ObjectMeta{Name: name, Generation: 1, CreationTimestamp: now},
		Cluster:    c.Name,
		Spec:       api.BackupSpec{Scheduled: scheduled},
		Status:     api.BackupStatus{Version: c.Spec.Release.Version},
	}
	b.Status.Conditions.Set(api.Condition{Type: api.ConditionComplete, Status: api.ConditionFalse,
		Reason: api.ReasonBackupInProgress, Message: "waiting for the snapshot", ObservedGeneration: 1}, now)
	return b, d.saveBackup(ctx, nil, b, VerbBackupCreated)
}

// saveBackup creates (rev 0) or updates the backup record, publishing verb (when not
// empty) through the outbox.
func (d *Daemon) saveBackup(ctx context.Context, prev *uint64, b *api.Backup, verb string) error {
	var sent outbox.Entry
	var err error
	if verb != "" {
		if sent, err = d.rt.Outbox.Record(ctx, b.Cluster, events.ResourceBackup, verb, b.Cluster+"/"+b.Name, b); err != nil {
			return err
		}
	}
	key := api.BackupKey(b.Cluster, b.Name)
	if prev == nil {
		_, err = d.backups.Create(ctx, key, b)
	} else {
		_, err = d.backups.Update(ctx, key, b, *prev)
	}
	if err != nil {
		return err
	}
	d.rt.Outbox.Send(ctx, sent)
	return nil
}

// clusterBackups returns the cluster's backups, newest first.
func (d *Daemon) clusterBackups(ctx context.Context, cluster string) ([]store.Entry[api.Backup], error) {
	entries, err := d.backups.List(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b store.Entry[api.Backup]) int {
		if c := b.Value.CreationTimestamp.Compare(a.Value.CreationTimestamp); c != 0 {
			return c
		}
		return strings.Compare(b.Value.Name, a.Value.Name)
	})
	return entries, nil
}

// listBackups answers GET /v1/clusters/{cluster}/backups, newest first. A deleted cluster's
// backups stay listed (they are what a new cluster restores from).
func (d *Daemon) listBackups(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	entries, err := d.clusterBackups(r.Context(), cluster)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		if _, _, err := d.clusters.Get(r.Context(), cluster); errors.Is(err, store.ErrNotFound) {
			return api.Errorf(api.CodeNotFound, "cluster %q not found and has no backups", cluster)
		} else if err != nil {
			return err
		}
	}
	list := api.BackupList{Items: make([]api.Backup, 0, len(entries))}
	for _, e := range entries {
		list.Items = append(list.Items, *e.Value)
	}
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

func (d *Daemon) lookupBackup(ctx context.Context, cluster, name string) (*api.Backup, uint64, error) {
	b, rev, err := d.backups.Get(ctx, api.BackupKey(cluster, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, api.Errorf(api.CodeNotFound, "cluster %q has no backup %q", cluster, name)
	}
	return b, rev, err
}

// getBackup answers GET /v1/clusters/{cluster}/backups/{backup}.
func (d *Daemon) getBackup(w http.ResponseWriter, r *http.Request) error {
	cluster, name, err := backupParam(r)
	if err != nil {
		return err
	}
	b, _, err := d.lookupBackup(r.Context(), cluster, name)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, b)
	return nil
}

// deleteBackup answers DELETE /v1/clusters/{cluster}/backups/{backup}: the snapshot and the
// record are removed (204). A backup being taken cannot be deleted yet (409).
func (d *Daemon) deleteBackup(w http.ResponseWriter, r *http.Request) error {
	cluster, name, err := backupParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	b, rev, err := d.lookupBackup(ctx, cluster, name)
	if err != nil {
		return err
	}
	if !b.IsComplete() && !b.IsFailed() {
		return api.Errorf(api.CodeConflict, "backup %s/%s is being taken; delete it once it is complete", cluster, name)
	}
	if by, err := d.restoreNeeding(ctx, b); err != nil {
		return err
	} else if by != "" {
		return api.Errorf(api.CodeConflict, "backup %s/%s is needed by %s; it can be deleted once that is done", cluster, name, by)
	}
	if err := d.removeBackup(ctx, b, rev); err != nil {
		return err
	}
	d.Logger().InfoContext(ctx, "backup deleted", "cluster", cluster, "backup", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// restoreNeeding says which pending restore needs backup b ("" if none): an in-place
// restore of its cluster requested from it (cancel it with DELETE .../restore), or a
// cluster created with spec.restoreFrom naming it whose etcd has not been restored yet.
func (d *Daemon) restoreNeeding(ctx context.Context, b *api.Backup) (string, error) {
	req, _, err := getOptional(ctx, d.restores, restoreKey(b.Cluster))
	if err != nil {
		return "", err
	}
	if req != nil && req.Backup == b.Name {
		return fmt.Sprintf("the pending in-place restore of cluster %q (DELETE /v1/clusters/%s/restore cancels it)", b.Cluster, b.Cluster), nil
	}
	clusters, err := d.clusters.List(ctx)
	if err != nil {
		return "", err
	}
	for _, e := range clusters {
		from := e.Value.Spec.RestoreFrom
		if from == nil || from.Cluster != b.Cluster || from.Backup != b.Name || e.Value.DeletionTimestamp != nil {
			continue
		}
		etcd, _, err := getOptional(ctx, d.components, api.ComponentKey(e.Value.Name, api.ComponentEtcd))
		if err != nil {
			return "", err
		}
		if etcd == nil || !etcd.Status.Conditions.IsTrue(api.ConditionAvailable) && restoring(etcd) {
			return fmt.Sprintf("cluster %q, which is being restored from it", e.Value.Name), nil
		}
	}
	return "", nil
}

// restoring: the etcd component says a restore is under way or failing.
func restoring(etcd *api.ControlPlaneComponent) bool {
	c, _ := etcd.Status.Conditions.Get(api.ConditionAvailable)
	return c.Reason == ReasonRestoring || c.Reason == ReasonRestoreFailed
}

// cancelRestore answers DELETE /v1/clusters/{cluster}/restore: a pending in-place restore
// is cancelled (204; 404 when none is pending). The cluster's reconcile puts back the etcd
// data the restore set aside, if it got that far (the etcd component says
// RestoreCancelled meanwhile), and starts the control plane again: the data is exactly as
// it was before the restore was requested.
func (d *Daemon) cancelRestore(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	req, rev, err := getOptional(ctx, d.restores, restoreKey(cluster))
	if err != nil {
		return err
	}
	if req == nil {
		return api.Errorf(api.CodeNotFound, "cluster %q has no pending in-place restore", cluster)
	}
	if err := d.restores.Delete(ctx, restoreKey(cluster), rev); errors.Is(err, store.ErrConflict) {
		return api.Errorf(api.CodeConflict, "the in-place restore of cluster %q changed meanwhile; try again", cluster)
	} else if err != nil {
		return err
	}
	d.Logger().InfoContext(ctx, "in-place restore cancelled", "cluster", cluster)
	d.enqueue(cluster)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeBackup deletes a backup's snapshot, then its record (publishing backup.deleted).
func (d *Daemon) removeBackup(ctx context.Context, b *api.Backup, rev uint64) error {
	if err := d.snapshots.Delete(ctx, api.SnapshotObject(b.Cluster, b.Name)); err != nil {
		return fmt.Errorf("delete snapshot: %w", err)
	}
	sent, err := d.rt.Outbox.Record(ctx, b.Cluster, events.ResourceBackup, events.VerbBackupDeleted, b.Cluster+"/"+b.Name, b)
	if err != nil {
		return err
	}
	if err := d.backups.Delete(ctx, api.BackupKey(b.Cluster, b.Name), rev); err != nil {
		return err
	}
	d.rt.Outbox.Send(ctx, sent)
	return d.keys.Delete(ctx, keysKey(b.Cluster, b.Name), 0)
}

// saveKeys keeps the cluster's Secret encryption keys with its backup.
func (d *Daemon) saveKeys(ctx context.Context, cl *clusterState, backup string) error {
	enc := cl.pki.SecretEncryption
	if enc == nil || enc.Type != api.SecretEncryptionAESCBC || len(enc.Keys) == 0 {
		return nil
	}
	key := keysKey(cl.cluster.Name, backup)
	if err := d.keys.Delete(ctx, key, 0); err != nil {
		return err
	}
	_, err := d.keys.Create(ctx, key, &backupKeys{Keys: enc.Keys})
	return err
}

// withRestoredKeys returns the cluster's PKI with the Secret encryption keys of the backup
// it was restored from appended (after its own, so they only decrypt), when it has any.
func (d *Daemon) withRestoredKeys(ctx context.Context, pki *api.ClusterPKI, from *api.RestoreSource) (*api.ClusterPKI, error) {
	if from == nil || pki.SecretEncryption == nil || pki.SecretEncryption.Type != api.SecretEncryptionAESCBC {
		return pki, nil
	}
	k, _, err := getOptional(ctx, d.keys, keysKey(from.Cluster, from.Backup))
	if err != nil || k == nil {
		return pki, err
	}
	p, enc := *pki, *pki.SecretEncryption
	enc.Keys = slices.Clone(enc.Keys)
	for _, old := range k.Keys {
		// kube-apiserver finds a value's key by the name it stored with it: keep the name.
		if !slices.ContainsFunc(enc.Keys, func(e api.EncryptionKey) bool { return e.Name == old.Name }) {
			enc.Keys = append(enc.Keys, old)
		}
	}
	p.SecretEncryption = &enc
	return &p, nil
}

// restoreBackup answers POST /v1/clusters/{cluster}/backups/{backup}/restore: the cluster's
// etcd is restored in place from its backup (202). The cluster's reconcile stops the control
// plane, restores every etcd member's data and starts it again; the etcd component says
// RestoringFromBackup meanwhile and backup.restored is published when the data is back.
func (d *Daemon) restoreBackup(w http.ResponseWriter, r *http.Request) error {
	cluster, name, err := backupParam(r)
	if err != nil {
		return err
	}
	if err := d.backupsSupported(); err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := d.liveCluster(ctx, cluster); err != nil {
		return err
	}
	b, _, err := d.lookupBackup(ctx, cluster, name)
	if err != nil {
		return err
	}
	if !b.IsComplete() {
		return api.Errorf(api.CodeConflict, "backup %s/%s is not complete; only a complete backup can be restored", cluster, name)
	}
	_, err = d.restores.Create(ctx, restoreKey(cluster), &restoreRequest{Backup: name, RequestedAt: time.Now().UTC()})
	if errors.Is(err, store.ErrExists) {
		return api.Errorf(api.CodeConflict, "cluster %q is being restored already", cluster)
	}
	if err != nil {
		return err
	}
	d.Logger().InfoContext(ctx, "in-place restore requested", "cluster", cluster, "backup", name)
	d.enqueue(cluster)
	httpapi.WriteJSON(w, http.StatusAccepted, b)
	return nil
}

// enqueue asks for the cluster's reconcile now.
func (d *Daemon) enqueue(cluster string) {
	if d.controller != nil {
		d.controller.Enqueue(cluster)
	}
}

// backupStep runs after the cluster's control plane converged: it takes the snapshots asked
// for, starts a scheduled one when it is due and applies the schedule's retention. It returns
// res with RequeueAfter no later than the next scheduled backup.
func (d *Daemon) backupStep(ctx context.Context, log *slog.Logger, cl *clusterState, etcd etcdAccess, res reconcile.Result) (reconcile.Result, error) {
	c := cl.cluster
	d.metrics.exportBackups(c.Name)
	entries, err := d.clusterBackups(ctx, c.Name)
	if err != nil {
		return res, err
	}
	now := d.cfg.Clock.Now().UTC()
	if s := c.Spec.Etcd; s != nil && s.Backup != nil {
		sched, err := cron.ParseStandard(s.Backup.Schedule)
		if err != nil { // clusterd validated it; a record written otherwise is reported, not fatal
			log.Warn("spec.etcd.backup.schedule is not a cron schedule; no scheduled backups", "schedule", s.Backup.Schedule, "err", err)
		} else {
			last := c.CreationTimestamp
			for _, e := range entries {
				if e.Value.Spec.Scheduled {
					last = e.Value.CreationTimestamp
					break // newest first
				}
			}
			next := sched.Next(last)
			if !now.Before(next) {
				b, err := d.newBackup(ctx, c, scheduledPrefix+now.Format("20060102-150405"), true)
				if err != nil && !errors.Is(err, store.ErrExists) {
					return res, err
				}
				if err == nil {
					log.Info("scheduled backup due", "backup", b.Name, "schedule", s.Backup.Schedule)
				}
				if entries, err = d.clusterBackups(ctx, c.Name); err != nil {
					return res, err
				}
				next = sched.Next(now)
			}
			if wait := next.Sub(now); res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = max(wait, time.Second)
			}
		}
	}
	// Take what is asked for, oldest first.
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Value.IsComplete() || e.Value.IsFailed() {
			continue
		}
		if err := d.take(ctx, log, cl, etcd, e.Value, e.Revision); err != nil {
			return res, err
		}
	}
	if s := c.Spec.Etcd; s != nil && s.Backup != nil {
		return res, d.retain(ctx, log, c.Name, max(s.Backup.Retention, 1))
	}
	return res, nil
}

// retain deletes the cluster's scheduled backups beyond the newest keep (finished ones only).
func (d *Daemon) retain(ctx context.Context, log *slog.Logger, cluster string, keep int) error {
	entries, err := d.clusterBackups(ctx, cluster)
	if err != nil {
		return err
	}
	kept := 0
	for _, e := range entries {
		if !e.Value.Spec.Scheduled {
			continue
		}
		if kept++; kept <= keep || (!e.Value.IsComplete() && !e.Value.IsFailed()) {
			continue
		}
		if by, err := d.restoreNeeding(ctx, e.Value); err != nil {
			return err
		} else if by != "" {
			log.Info("scheduled backup kept beyond retention: a restore needs it", "backup", e.Value.Name, "by", by)
			continue
		}
		if err := d.removeBackup(ctx, e.Value, e.Revision); err != nil {
			return err
		}
		log.Info("scheduled backup deleted by retention", "backup", e.Value.Name, "retention", keep)
	}
	return nil
}

// failPending marks the backups still to be taken of a cluster that is going away as failed.
func (d *Daemon) failPending(ctx context.Context, cluster, why string) error {
	entries, err := d.clusterBackups(ctx, cluster)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Value.IsComplete() || e.Value.IsFailed() {
			continue
		}
		b := *e.Value
		b.Status.Conditions = slices.Clone(b.Status.Conditions)
		b.Status.Conditions.Set(api.Condition{Type: api.ConditionComplete, Status: api.ConditionFalse,
			Reason: api.ReasonBackupFailed, Message: why, ObservedGeneration: b.Generation}, time.Now().UTC())
		if err := d.saveBackup(ctx, &e.Revision, &b, VerbBackupFailed); err != nil {
			return err
		}
		d.metrics.observeBackup(&b, 0)
	}
	return nil
}
