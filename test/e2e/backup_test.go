package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// waitBackup waits for the backup's Complete condition to be True and returns it.
func (c *client) waitBackup(cluster, name string) api.Backup {
	c.t.Helper()
	var b api.Backup
	testenv.Eventually(c.t, available, func() bool {
		code, _ := c.do("GET", "/v1/clusters/"+cluster+"/backups/"+name, "", &b)
		if code == http.StatusOK && b.IsFailed() {
			c.t.Fatalf("backup %s/%s failed: %s", cluster, name, lazyJSON{&b})
		}
		return code == http.StatusOK && b.IsComplete()
	}, "backup %s/%s never completed: %s", cluster, name, lazyJSON{&b})
	return b
}

func writeConfigMaps(t *testing.T, kc *kubernetes.Clientset, names ...string) {
	t.Helper()
	for _, n := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"written": n}}
		if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap %s: %v", n, err)
		}
	}
}

// expectConfigMaps waits until the guest serves every name in present and none in absent.
func expectConfigMaps(t *testing.T, c *client, cluster string, present, absent []string) {
	t.Helper()
	var last string
	testenv.Eventually(t, available, func() bool {
		kc := c.kubeClient(cluster)
		for _, n := range present {
			cm, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), n, metav1.GetOptions{})
			if err != nil || cm.Data["written"] != n {
				last = fmt.Sprintf("configmap %s: %v", n, err)
				return false
			}
		}
		for _, n := range absent {
			if _, err := kc.CoreV1().ConfigMaps("default").Get(ctx(t), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				last = fmt.Sprintf("configmap %s: want NotFound, got %v", n, err)
				return false
			}
		}
		return true
	}, "cluster %s: %s", cluster, lazyJSON{&last})
}

// TestBackup_RestoreIntoANewClusterAndInPlaceAfterDataLoss is the checklist of issue 14's
// backup part: take a backup, write more, restore into a new cluster while the old one runs
// (the objects written before the backup are there, those after are not); then lose the old
// cluster's etcd data and restore it in place.
func TestBackup_RestoreIntoANewClusterAndInPlaceAfterDataLoss(t *testing.T) {
	s, c := stack(t)
	expect := func(method, path, body string, want int) []byte {
		t.Helper()
		code, b := c.do(method, path, body, nil)
		if code != want {
			t.Fatalf("%s %s %s: %d, want %d: %s", method, path, body, code, want, b)
		}
		return b
	}
	expect("POST", "/v1/clusters", `{"name":"src","spec":{"release":{"version":"`+newRelease+`"}}}`, http.StatusAccepted)
	c.waitCondition("src", api.ConditionAvailable, api.ConditionTrue, available)
	before := []string{"before-1", "before-2", "before-3"}
	writeConfigMaps(t, c.kubeClient("src"), before...)
	// A Secret: encrypted in etcd with src's key, which the restored cluster must still read.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "before-secret"}, StringData: map[string]string{"password": "hunter2"}}
	if _, err := c.kubeClient("src").CoreV1().Secrets("default").Create(ctx(t), secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}

	// Refusals: problem+json, never 500.
	expect("POST", "/v1/clusters/src/backups", `{"name":"Not_A_Label"}`, http.StatusBadRequest)
	expect("POST", "/v1/clusters/src/backups", `{}`, http.StatusBadRequest)
	expect("POST", "/v1/clusters/nope/backups", `{"name":"b1"}`, http.StatusNotFound)
	expect("GET", "/v1/clusters/nope/backups", "", http.StatusNotFound)
	expect("GET", "/v1/clusters/src/backups/b1", "", http.StatusNotFound)

	expect("POST", "/v1/clusters/src/backups", `{"name":"b1"}`, http.StatusAccepted)
	expect("POST", "/v1/clusters/src/backups", `{"name":"b1"}`, http.StatusConflict)
	b := c.waitBackup("src", "b1")
	if b.Status.SizeBytes <= 0 || b.Status.Revision <= 0 || b.Status.SHA256 == "" || b.Status.CompletionTime == nil || b.Status.Version != newRelease {
		t.Fatalf("complete backup lacks size, revision, checksum, time or version: %s", lazyJSON{&b})
	}
	var list api.BackupList
	if code, body := c.do("GET", "/v1/clusters/src/backups", "", &list); code != http.StatusOK || len(list.Items) != 1 {
		t.Fatalf("list backups: %d %s", code, body)
	}
	after := []string{"after-1"}
	writeConfigMaps(t, c.kubeClient("src"), after...)

	// Restore into a new cluster while src keeps running.
	expect("POST", "/v1/clusters", `{"name":"bad","spec":{"release":{"version":"`+newRelease+`"},"restoreFrom":{"cluster":"src","backup":"nope"}}}`, http.StatusBadRequest)
	expect("POST", "/v1/clusters", `{"name":"copy","spec":{"release":{"version":"`+newRelease+`"},"restoreFrom":{"cluster":"src","backup":"b1"}}}`, http.StatusAccepted)
	c.waitCondition("copy", api.ConditionAvailable, api.ConditionTrue, available)
	expectConfigMaps(t, c, "copy", before, after)
	got, err := c.kubeClient("copy").CoreV1().Secrets("default").Get(ctx(t), "before-secret", metav1.GetOptions{})
	if err != nil || string(got.Data["password"]) != "hunter2" {
		t.Fatalf("the restored cluster cannot read the backup's Secret: %v %v", got, err)
	}
	expectConfigMaps(t, c, "src", append(before, after...), nil)
	expect("PATCH", "/v1/clusters/copy", `{"spec":{"restoreFrom":null}}`, http.StatusBadRequest)

	// An in-place restore that keeps failing (the snapshot cannot be written where
	// componentd fetches it) is retried without touching the data it set aside; the backup it
	// needs cannot be deleted meanwhile; cancelling it puts the data back exactly as it was.
	blocker := filepath.Join(c.dataDir, "componentd", "backups", "restore-src-b1.db")
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	expect("DELETE", "/v1/clusters/src/restore", "", http.StatusNotFound)
	expect("POST", "/v1/clusters/src/backups/b1/restore", "", http.StatusAccepted)
	expect("POST", "/v1/clusters/src/backups/b1/restore", "", http.StatusConflict)
	expect("DELETE", "/v1/clusters/src/backups/b1", "", http.StatusConflict)
	var etcdCond api.Condition
	testenv.Eventually(t, available, func() bool {
		var comps api.ComponentList
		if code, _ := c.do("GET", "/v1/clusters/src/components", "", &comps); code != http.StatusOK {
			return false
		}
		for _, comp := range comps.Items {
			if comp.Name == api.ComponentEtcd {
				etcdCond, _ = comp.Status.Conditions.Get(api.ConditionAvailable)
			}
		}
		return etcdCond.Reason == "RestoreFailed" && strings.Contains(etcdCond.Message, "(attempt 2) failed")
	}, "the failing restore was not retried: etcd says %s", lazyJSON{&etcdCond})
	expect("DELETE", "/v1/clusters/src/restore", "", http.StatusNoContent)
	expect("DELETE", "/v1/clusters/src/restore", "", http.StatusNotFound)
	c.waitCondition("src", api.ConditionAvailable, api.ConditionTrue, available)
	expectConfigMaps(t, c, "src", append(before, after...), nil)
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}

	// Lose src's etcd data: wipe the member's data directory and kill it; the supervisor
	// starts it again, empty.
	var comps api.ComponentList
	if code, body := c.do("GET", "/v1/clusters/src/components", "", &comps); code != http.StatusOK {
		t.Fatalf("components: %d %s", code, body)
	}
	pid := 0
	for _, comp := range comps.Items {
		if comp.Name == api.ComponentEtcd && len(comp.Status.Replicas) > 0 {
			pid = comp.Status.Replicas[0].Pid
		}
	}
	if pid <= 0 {
		t.Fatalf("no etcd pid in %s", lazyJSON{&comps})
	}
	dataDir := filepath.Join(c.dataDir, "componentd", "clusters", "src", "etcd-0")
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill etcd %d: %v", pid, err)
	}
	expectConfigMaps(t, c, "src", nil, append(before, after...)) // the data is gone

	expect("POST", "/v1/clusters/src/backups/nope/restore", "", http.StatusNotFound)
	expect("POST", "/v1/clusters/src/backups/b1/restore", "", http.StatusAccepted)
	expectConfigMaps(t, c, "src", before, after)
	cl := c.waitCondition("src", api.ConditionAvailable, api.ConditionTrue, available)
	t.Logf("src Available again after the in-place restore: %s", strconv.Quote(cl.Name))

	// Deleting a backup removes it; the copy keeps running.
	expect("DELETE", "/v1/clusters/src/backups/b1", "", http.StatusNoContent)
	expect("GET", "/v1/clusters/src/backups/b1", "", http.StatusNotFound)

	// Scheduled backups with retention: on-demand ones are never deleted by it.
	expect("POST", "/v1/clusters/src/backups", `{"name":"keep-me"}`, http.StatusAccepted)
	c.waitBackup("src", "keep-me")
	// A cluster holds at most --max-backups-per-cluster on-demand backups (3 on this stack;
	// b1 was deleted above, keep-me is one): two more are taken, a third more is refused.
	expect("POST", "/v1/clusters/src/backups", `{"name":"more-1"}`, http.StatusAccepted)
	expect("POST", "/v1/clusters/src/backups", `{"name":"more-2"}`, http.StatusAccepted)
	if b := expect("POST", "/v1/clusters/src/backups", `{"name":"more-3"}`, http.StatusConflict); !strings.Contains(string(b), "--max-backups-per-cluster") {
		t.Errorf("a fourth on-demand backup: %s; want a refusal naming the quota", b)
	}
	for _, n := range []string{"more-1", "more-2"} {
		c.waitBackup("src", n)
		expect("DELETE", "/v1/clusters/src/backups/"+n, "", http.StatusNoContent)
	}
	expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":{"backup":{"schedule":"every minute"}}}}`, http.StatusBadRequest)
	expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":{"backup":{"schedule":"@every 1m","retention":0}}}}`, http.StatusOK) // 0: the default
	expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":{"backup":{"schedule":"@every 2s","retention":101}}}}`, http.StatusBadRequest)
	// More often than the operator allows (clusterd --min-backup-interval; 2s on this stack).
	if b := expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":{"backup":{"schedule":"@every 1s"}}}}`, http.StatusBadRequest); !strings.Contains(string(b), "at most every "+sharedMinBackupInterval.String()) {
		t.Errorf("a 1s backup schedule: %s; want a refusal naming the minimum", b)
	}
	expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":{"backup":{"schedule":"@every 2s","retention":2}}}}`, http.StatusOK)
	seen := map[string]bool{}
	testenv.Eventually(t, available, func() bool {
		list = api.BackupList{} // decoding into the old items would keep their fields
		if code, _ := c.do("GET", "/v1/clusters/src/backups", "", &list); code != http.StatusOK {
			return false
		}
		scheduled, onDemand := 0, 0
		for _, b := range list.Items {
			if !b.Spec.Scheduled {
				onDemand++
				continue
			}
			scheduled++
			if b.IsComplete() {
				seen[b.Name] = true
			}
		}
		if onDemand != 1 {
			t.Fatalf("retention deleted an on-demand backup: %s", lazyJSON{&list})
		}
		return len(seen) >= 4 && scheduled == 2
	}, "scheduled backups: %d complete seen, list %s", len(seen), lazyJSON{&list})
	expect("PATCH", "/v1/clusters/src", `{"spec":{"etcd":null}}`, http.StatusOK)
	for _, v := range s.NATSViolations() {
		t.Errorf("NATS permission violation: %s", v)
	}
}

// TestBackup_HighlyAvailable_TakenWithoutDowntimeAndRestoredIntoEveryMember: a backup of a
// HighlyAvailable cluster is taken from a follower while the endpoint answers every poll,
// and an in-place restore restores all three etcd members, which form one cluster again.
func TestBackup_HighlyAvailable_TakenWithoutDowntimeAndRestoredIntoEveryMember(t *testing.T) {
	_, c := stack(t)
	code, body := c.do("POST", "/v1/clusters", `{"name":"ha","spec":{"release":{"version":"`+newRelease+`"},"controllerAvailabilityPolicy":"HighlyAvailable"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %s", code, body)
	}
	c.waitCondition("ha", api.ConditionAvailable, api.ConditionTrue, available)
	before := []string{"ha-before-1", "ha-before-2"}
	writeConfigMaps(t, c.kubeClient("ha"), before...)

	poll := c.pollEndpoint("ha")
	for _, n := range []string{"b1", "b2", "b3"} {
		if code, body := c.do("POST", "/v1/clusters/ha/backups", `{"name":"`+n+`"}`, nil); code != http.StatusAccepted {
			t.Fatalf("backup %s: %d %s", n, code, body)
		}
		b := c.waitBackup("ha", n)
		t.Logf("backup %s: member %s, revision %d, %d bytes", n, b.Status.Member, b.Status.Revision, b.Status.SizeBytes)
	}
	poll.finish(t, "three backups")

	after := []string{"ha-after-1"}
	writeConfigMaps(t, c.kubeClient("ha"), after...)
	if code, body := c.do("POST", "/v1/clusters/ha/backups/b3/restore", "", nil); code != http.StatusAccepted {
		t.Fatalf("restore: %d %s", code, body)
	}
	expectConfigMaps(t, c, "ha", before, after)
	var comps api.ComponentList
	testenv.Eventually(t, available, func() bool {
		comps = api.ComponentList{}
		if code, _ := c.do("GET", "/v1/clusters/ha/components", "", &comps); code != http.StatusOK {
			return false
		}
		for _, comp := range comps.Items {
			if comp.Name == api.ComponentEtcd {
				return comp.Status.ReadyReplicas == 3 && comp.Status.Conditions.IsTrue(api.ConditionAvailable)
			}
		}
		return false
	}, "etcd never had 3 ready members again after the restore: %s", lazyJSON{&comps})
	c.waitCondition("ha", api.ConditionAvailable, api.ConditionTrue, available)
}

// TestBackup_InAnS3CompatibleStore_RestoresAndDeletesThere points componentd at a real
// S3-compatible store (SeaweedFS's S3 gateway) instead of the JetStream object store: a
// backup's snapshot lands there under the configured prefix, a new cluster is restored from
// it with its objects, and deleting the backup deletes the object.
func TestBackup_InAnS3CompatibleStore_RestoresAndDeletesThere(t *testing.T) {
	srv := testenv.S3(t)
	// componentd reads the credentials where the AWS tools do.
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	storeURL := srv.URL + "/hostplane-backups/e2e"
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.BackupStoreURL = storeURL })
	t.Cleanup(func() { s.Stop(context.Background()) })

	if code, b := c.do("POST", "/v1/clusters", `{"name":"src","spec":{"release":{"version":"`+newRelease+`"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("create src: %d %s", code, b)
	}
	c.waitCondition("src", api.ConditionAvailable, api.ConditionTrue, available)
	before := []string{"s3-before-1", "s3-before-2"}
	writeConfigMaps(t, c.kubeClient("src"), before...)
	if code, b := c.do("POST", "/v1/clusters/src/backups", `{"name":"b1"}`, nil); code != http.StatusAccepted {
		t.Fatalf("backup: %d %s", code, b)
	}
	b := c.waitBackup("src", "b1")
	if cond, _ := b.Status.Conditions.Get(api.ConditionComplete); !strings.Contains(cond.Message, storeURL) {
		t.Errorf("the Complete condition does not say the snapshot is in %s: %q", storeURL, cond.Message)
	}

	s3c, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s3c.StatObject(ctx(t), "hostplane-backups", "e2e/src/b1", minio.StatObjectOptions{})
	if err != nil || info.Size != b.Status.SizeBytes {
		t.Fatalf("the snapshot in the S3 store: %+v, %v; want %d bytes at e2e/src/b1", info, err, b.Status.SizeBytes)
	}

	if code, b := c.do("POST", "/v1/clusters", `{"name":"copy","spec":{"release":{"version":"`+newRelease+`"},"restoreFrom":{"cluster":"src","backup":"b1"}}}`, nil); code != http.StatusAccepted {
		t.Fatalf("restore into copy: %d %s", code, b)
	}
	c.waitCondition("copy", api.ConditionAvailable, api.ConditionTrue, available)
	expectConfigMaps(t, c, "copy", before, nil)

	if code, b := c.do("DELETE", "/v1/clusters/src/backups/b1", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete backup: %d %s", code, b)
	}
	if _, err := s3c.StatObject(ctx(t), "hostplane-backups", "e2e/src/b1", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("the deleted backup's snapshot is still in the S3 store: %v", err)
	}
}
