package api_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestValidateCluster_BackupFields_NameEachBadField(t *testing.T) {
	parse := func(s string) error {
		if s == "@every 1h" || s == "0 * * * *" {
			return nil
		}
		return errors.New("bad")
	}
	cat := api.ReleaseCatalogue{ParseSchedule: parse}
	for _, tc := range []struct {
		name   string
		spec   api.ClusterSpec
		fields []string
	}{
		{"a schedule with the default retention", api.ClusterSpec{Etcd: &api.EtcdSpec{Backup: &api.EtcdBackupSchedule{Schedule: "0 * * * *"}}}, nil},
		{"no schedule", api.ClusterSpec{Etcd: &api.EtcdSpec{Backup: &api.EtcdBackupSchedule{Retention: 3}}}, []string{"spec.etcd.backup.schedule"}},
		{"not cron", api.ClusterSpec{Etcd: &api.EtcdSpec{Backup: &api.EtcdBackupSchedule{Schedule: "hourly"}}}, []string{"spec.etcd.backup.schedule"}},
		{"retention too large", api.ClusterSpec{Etcd: &api.EtcdSpec{Backup: &api.EtcdBackupSchedule{Schedule: "@every 1h", Retention: 101}}}, []string{"spec.etcd.backup.retention"}},
		{"restore source names", api.ClusterSpec{RestoreFrom: &api.RestoreSource{Cluster: "Bad", Backup: ""}}, []string{"spec.restoreFrom.backup", "spec.restoreFrom.cluster"}},
		{"restore source", api.ClusterSpec{RestoreFrom: &api.RestoreSource{Cluster: "src", Backup: "b1"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := api.Cluster{Spec: tc.spec}
			c.Name = "demo"
			c.Spec.Release.Version = "1.34.4"
			c.Spec.Default()
			err := api.ValidateCluster(&c, cat)
			var got []string
			var ae *api.Error
			if errors.As(err, &ae) {
				for _, f := range ae.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("not an api.Error: %v", err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v (%v)", got, tc.fields, err)
			}
			if b := c.Spec.Etcd; b != nil && b.Backup != nil && tc.fields == nil && b.Backup.Retention != api.DefaultBackupRetention {
				t.Errorf("retention defaulted to %d, want %d", b.Backup.Retention, api.DefaultBackupRetention)
			}
		})
	}
}

func TestValidateClusterUpdate_RestoreFromIsImmutable(t *testing.T) {
	old := api.ClusterSpec{Release: api.Release{Version: "1.34.4"}, RestoreFrom: &api.RestoreSource{Cluster: "src", Backup: "b1"}}
	old.Default()
	updated := old
	updated.RestoreFrom = nil
	err := api.ValidateClusterUpdate(&old, &updated, api.ReleaseCatalogue{})
	var ae *api.Error
	if !errors.As(err, &ae) || len(ae.Fields) != 1 || ae.Fields[0].Field != "spec.restoreFrom" {
		t.Fatalf("dropping restoreFrom: %v, want a field error on spec.restoreFrom", err)
	}
}
