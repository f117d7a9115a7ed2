package api

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Backup is one etcd snapshot of a cluster (bucket "backups", key "<cluster>.<backup>"),
// taken on demand (POST /v1/clusters/{cluster}/backups) or by the cluster's
// spec.etcd.backup.schedule. componentd is its only writer; the snapshot itself is the
// object "<cluster>/<backup>" of the object store "etcd-snapshots" (docs/backups.md).
// A backup outlives its cluster, so a deleted cluster can be restored into a new one.
type Backup struct {
	ObjectMeta
	Cluster string       `json:"cluster"`
	Spec    BackupSpec   `json:"spec"`
	Status  BackupStatus `json:"status"`
}

// BackupSpec says how the backup came to be.
type BackupSpec struct {
	// Scheduled is true for a backup the schedule took: the schedule's retention deletes
	// the oldest of those, never an on-demand one.
	Scheduled bool `json:"scheduled,omitempty"`
}

// BackupStatus is what the snapshot turned out to be.
type BackupStatus struct {
	// Conditions: Complete (True once the snapshot is stored; False with reason InProgress
	// while it is taken, Failed with the error).
	Conditions Conditions `json:"conditions,omitempty"`
	// SizeBytes is the snapshot's size.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Revision is the etcd revision the snapshot holds.
	Revision int64 `json:"revision,omitempty"`
	// Member is the etcd member it was taken from.
	Member string `json:"member,omitempty"`
	// Version is the cluster's release when it was taken.
	Version string `json:"version,omitempty"`
	// SHA256 is the snapshot's checksum, verified before every restore.
	SHA256 string `json:"sha256,omitempty"`
	// StartTime and CompletionTime bound the snapshot.
	StartTime      *time.Time `json:"startTime,omitempty"`
	CompletionTime *time.Time `json:"completionTime,omitempty"`
}

// BackupList is GET /v1/clusters/{cluster}/backups, newest first.
type BackupList struct {
	Items []Backup `json:"items"`
}

// Backup condition type and reasons.
const (
	ConditionComplete = "Complete"

	ReasonBackupInProgress = "InProgress"
	ReasonBackupFailed     = "Failed"
	ReasonBackupSucceeded  = "SnapshotStored"
)

// IsComplete reports whether the backup's snapshot is stored.
func (b *Backup) IsComplete() bool { return b.Status.Conditions.IsTrue(ConditionComplete) }

// IsFailed reports whether taking the backup failed.
func (b *Backup) IsFailed() bool {
	c, ok := b.Status.Conditions.Get(ConditionComplete)
	return ok && c.Status == ConditionFalse && c.Reason == ReasonBackupFailed
}

// BackupKey is a backup's key in the backups bucket.
func BackupKey(cluster, backup string) string { return cluster + "." + backup }

// SnapshotObject is the name of a backup's snapshot in the object store.
func SnapshotObject(cluster, backup string) string { return cluster + "/" + backup }

// MaxBackupNameLength bounds backup names: a DNS label.
const MaxBackupNameLength = 63

// ValidateBackupName reports whether name can name a backup: a DNS label.
func ValidateBackupName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Errorf("%q must be a DNS label of at most %d characters: lower-case letters, digits and '-', starting and ending with a letter or digit", name, MaxBackupNameLength)
	}
	return nil
}

// EtcdSpec is spec.etcd: how hostplane looks after the cluster's etcd.
type EtcdSpec struct {
	// Backup schedules backups; absent means on demand only.
	Backup *EtcdBackupSchedule `json:"backup,omitempty"`
}

// EtcdBackupSchedule is spec.etcd.backup.
type EtcdBackupSchedule struct {
	// Schedule is a cron expression (five fields, or a descriptor such as "@hourly" or
	// "@every 30m"), in UTC.
	Schedule string `json:"schedule"`
	// Retention is how many scheduled backups are kept (default DefaultBackupRetention);
	// the oldest go first. On-demand backups are never deleted by it.
	Retention int `json:"retention,omitempty"`
}

// Retention limits of spec.etcd.backup.retention.
const (
	DefaultBackupRetention = 7
	MaxBackupRetention     = 100
)

// RestoreSource is spec.restoreFrom: the backup a new cluster's etcd starts from.
type RestoreSource struct {
	Cluster string `json:"cluster"`
	Backup  string `json:"backup"`
}

// validateEtcd checks spec.etcd; the schedule's syntax is checked by the caller's
// ScheduleParser (pkg/api depends on no cron library).
func validateEtcd(fe *FieldErrors, e *EtcdSpec, parse func(string) error) {
	if e == nil || e.Backup == nil {
		return
	}
	b := e.Backup
	switch {
	case b.Schedule == "":
		fe.Add("spec.etcd.backup.schedule", "is required: a cron expression such as \"0 * * * *\" or \"@every 6h\"")
	case parse != nil:
		if err := parse(b.Schedule); err != nil {
			fe.Add("spec.etcd.backup.schedule", "%q is not a cron schedule: %v", b.Schedule, err)
		}
	}
	if b.Retention < 1 || b.Retention > MaxBackupRetention {
		fe.Add("spec.etcd.backup.retention", "must be from 1 to %d (it is %d)", MaxBackupRetention, b.Retention)
	}
}

// validateRestoreFrom checks spec.restoreFrom's names; whether the backup exists and is
// complete is clusterd's check.
func validateRestoreFrom(fe *FieldErrors, r *RestoreSource) {
	if r == nil {
		return
	}
	if err := ValidateClusterName(r.Cluster); err != nil {
		fe.Add("spec.restoreFrom.cluster", "%s", err)
	}
	if err := ValidateBackupName(r.Backup); err != nil {
		fe.Add("spec.restoreFrom.backup", "%s", err)
	}
}
