package componentd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// snapshotTimeout bounds taking and storing one snapshot.
const snapshotTimeout = 5 * time.Minute

// etcdAccess is how componentd reaches a cluster's etcd members.
type etcdAccess struct {
	cluster        string // also its --initial-cluster-token
	members        []component.EtcdMember
	initialCluster string
	tls            *tls.Config
	available      bool // the etcd component is Available
}

// dataDirs are the members' data directories, in member order.
func (e etcdAccess) dataDirs() []string {
	out := make([]string, len(e.members))
	for n, m := range e.members {
		out[n] = m.DataDir
	}
	return out
}

func newEtcdAccess(in *component.Inputs) (etcdAccess, error) {
	members, initial, err := component.EtcdMembers(in)
	if err != nil {
		return etcdAccess{}, err
	}
	cfg, err := component.EtcdClientTLS(in)
	if err != nil {
		return etcdAccess{}, err
	}
	return etcdAccess{cluster: in.Cluster, members: members, initialCluster: initial, tls: cfg}, nil
}

// backupsDir holds snapshots on their way to or from the object store.
func (d *Daemon) backupsDir() (string, error) {
	dir := filepath.Join(d.dir(), "backups")
	return dir, os.MkdirAll(dir, 0o700)
}

// take takes backup b (revision rev of its record) and records the outcome.
func (d *Daemon) take(ctx context.Context, log *slog.Logger, cl *clusterState, etcd etcdAccess, b *api.Backup, rev uint64) error {
	log = log.With("backup", b.Name)
	next := *b
	next.Status.Conditions = slices.Clone(b.Status.Conditions)
	if !etcd.available {
		const waiting = "waiting for etcd to be available"
		if c, _ := b.Status.Conditions.Get(api.ConditionComplete); c.Message == waiting {
			return nil
		}
		next.Status.Conditions.Set(api.Condition{Type: api.ConditionComplete, Status: api.ConditionFalse,
			Reason: api.ReasonBackupInProgress, Message: waiting, ObservedGeneration: b.Generation}, time.Now().UTC())
		return d.saveBackup(ctx, &rev, &next, "")
	}
	start := time.Now().UTC()
	next.Status.StartTime = &start
	st, err := d.snapshot(ctx, log, etcd, b)
	now := time.Now().UTC()
	verb := VerbBackupCompleted
	if err != nil {
		verb = VerbBackupFailed
		next.Status.Conditions.Set(api.Condition{Type: api.ConditionComplete, Status: api.ConditionFalse,
			Reason: api.ReasonBackupFailed, Message: err.Error(), ObservedGeneration: b.Generation}, now)
		log.Warn("backup failed", "err", err)
	} else if err = d.saveKeys(ctx, cl, b.Name); err != nil {
		return err
	} else {
		st.StartTime, st.CompletionTime, st.Version = &start, &now, cl.cluster.Spec.Release.Version
		st.Conditions = next.Status.Conditions
		next.Status = st
		next.Status.Conditions.Set(api.Condition{Type: api.ConditionComplete, Status: api.ConditionTrue,
			Reason: api.ReasonBackupSucceeded, ObservedGeneration: b.Generation,
			Message: fmt.Sprintf("snapshot of etcd revision %d from member %s stored in %s", st.Revision, st.Member, d.snapshots)}, now)
		log.Info("backup completed", "revision", st.Revision, "size_bytes", st.SizeBytes, "member", st.Member,
			"duration", now.Sub(start).Round(time.Millisecond))
	}
	if err := d.saveBackup(ctx, &rev, &next, verb); err != nil {
		return err
	}
	d.metrics.observeBackup(&next, now.Sub(start).Seconds())
	return nil
}

// snapshot streams an etcd snapshot from one healthy member into a file, reads its revision,
// and stores it in the object store. A member keeps serving while it sends a snapshot, so a
// HighlyAvailable cluster has no downtime; a follower is preferred so the leader is spared.
func (d *Daemon) snapshot(ctx context.Context, log *slog.Logger, etcd etcdAccess, b *api.Backup) (api.BackupStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	dir, err := d.backupsDir()
	if err != nil {
		return api.BackupStatus{}, err
	}
	path := filepath.Join(dir, "take-"+b.Cluster+"-"+b.Name+".db")
	_ = os.Remove(path)
	defer func() { _ = os.Remove(path) }()

	member, err := pickMember(ctx, etcd)
	if err != nil {
		return api.BackupStatus{}, err
	}
	lg := zap.NewNop()
	cfg := clientv3.Config{Endpoints: []string{member.ClientURL}, TLS: etcd.tls, DialTimeout: 5 * time.Second, Logger: lg}
	if _, err := clientsnapshot.SaveWithVersion(ctx, lg, cfg, path); err != nil {
		return api.BackupStatus{}, fmt.Errorf("snapshot of etcd member %s: %w", member.Name, err)
	}
	st, err := snapshot.NewV3(lg).Status(path)
	if err != nil {
		return api.BackupStatus{}, fmt.Errorf("read the snapshot: %w", err)
	}
	sum, size, err := fileSHA256(path)
	if err != nil {
		return api.BackupStatus{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return api.BackupStatus{}, err
	}
	defer f.Close()
	obj := api.SnapshotObject(b.Cluster, b.Name)
	if err := d.snapshots.Put(ctx, obj, fmt.Sprintf("etcd snapshot of cluster %s at revision %d", b.Cluster, st.Revision), f, size); err != nil {
		return api.BackupStatus{}, fmt.Errorf("store the snapshot in %s: %w", d.snapshots, err)
	}
	log.Debug("snapshot stored", "object", obj, "keys", st.TotalKey)
	return api.BackupStatus{SizeBytes: size, Revision: st.Revision, Member: member.Name, SHA256: sum}, nil
}

// pickMember returns a healthy member to snapshot: a follower when there is one.
func pickMember(ctx context.Context, etcd etcdAccess) (component.EtcdMember, error) {
	urls := make([]string, len(etcd.members))
	for i, m := range etcd.members {
		urls[i] = m.ClientURL
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, TLS: etcd.tls, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return component.EtcdMember{}, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	var leader *component.EtcdMember
	var errs []error
	for i, m := range etcd.members {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
		case len(st.Errors) > 0:
			errs = append(errs, fmt.Errorf("%s: %v", m.Name, st.Errors))
		case st.Leader == 0:
			errs = append(errs, fmt.Errorf("%s: no leader", m.Name))
		case st.Leader == st.Header.MemberId && len(etcd.members) > 1:
			leader = &etcd.members[i]
		default:
			return m, nil
		}
	}
	if leader != nil {
		return *leader, nil
	}
	return component.EtcdMember{}, fmt.Errorf("no healthy etcd member to snapshot: %w", errors.Join(errs...))
}

func fileSHA256(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	if size, err = io.Copy(h, f); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}
