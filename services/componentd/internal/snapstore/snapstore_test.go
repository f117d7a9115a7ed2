package snapstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/componentd/internal/snapstore"
)

// roundTrip stores a snapshot-sized object, reads it back into a file, replaces it, deletes
// it, and deletes it again: what componentd does with a backup's snapshot.
func roundTrip(t *testing.T, s snapstore.Store) {
	t.Helper()
	ctx := context.Background()
	first := make([]byte, 3<<20+17) // larger than one part or chunk of either store
	if _, err := rand.Read(first); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "demo/nightly", "etcd snapshot of cluster demo", bytes.NewReader(first), int64(len(first))); err != nil {
		t.Fatalf("put into %s: %v", s, err)
	}
	path := filepath.Join(t.TempDir(), "restore.db")
	if err := s.GetFile(ctx, "demo/nightly", path); err != nil {
		t.Fatalf("get from %s: %v", s, err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, first) {
		t.Fatalf("read back %d bytes, not the %d stored", len(got), len(first))
	}
	second := []byte("a smaller snapshot under the same name")
	if err := s.Put(ctx, "demo/nightly", "again", bytes.NewReader(second), int64(len(second))); err != nil {
		t.Fatalf("replace in %s: %v", s, err)
	}
	if err := s.GetFile(ctx, "demo/nightly", path); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, second) {
		t.Fatalf("after a replace read back %q, want %q", got, second)
	}
	for range 2 { // the second finds nothing to delete, which is no error
		if err := s.Delete(ctx, "demo/nightly"); err != nil {
			t.Fatalf("delete from %s: %v", s, err)
		}
	}
	if err := s.GetFile(ctx, "demo/nightly", filepath.Join(t.TempDir(), "gone.db")); err == nil {
		t.Fatalf("a deleted snapshot could still be read from %s", s)
	}
}

func TestS3_SnapshotsGoToARealS3StoreUnderTheirPrefix(t *testing.T) {
	srv := testenv.S3(t)
	ctx := context.Background()
	creds := credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")
	// The bucket is made on first use; the prefix keeps the snapshots apart from other data.
	s, err := snapstore.S3(ctx, snapstore.S3Config{URL: srv.URL + "/hostplane-backups/mgmt-1", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != srv.URL+"/hostplane-backups/mgmt-1" {
		t.Errorf("String() = %q, want the URL it was opened with", got)
	}
	roundTrip(t, s)

	// What is stored is under the prefix: another store on the same bucket without it
	// does not see the object.
	if err := s.Put(ctx, "demo/kept", "", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	bare, err := snapstore.S3(ctx, snapstore.S3Config{URL: srv.URL + "/hostplane-backups", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.GetFile(ctx, "demo/kept", filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("an object stored under the prefix mgmt-1 was found without it")
	}
	if err := bare.GetFile(ctx, "mgmt-1/demo/kept", filepath.Join(t.TempDir(), "x")); err != nil {
		t.Errorf("the object is not at <prefix>/<cluster>/<backup>: %v", err)
	}
}

func TestS3_WrongCredentialsOrABadURLAreClearErrors(t *testing.T) {
	srv := testenv.S3(t)
	ctx := context.Background()
	_, err := snapstore.S3(ctx, snapstore.S3Config{URL: srv.URL + "/hostplane-backups",
		Credentials: credentials.NewStaticV4(srv.AccessKey, "not-the-secret", "")})
	if err == nil || !strings.Contains(err.Error(), "hostplane-backups") {
		t.Errorf("opening with a wrong secret: %v, want an error naming the bucket", err)
	}
	for _, u := range []string{"s3://bucket", "https:///bucket", "https://s3.example.com", "https://s3.example.com/", ":%"} {
		if _, err := snapstore.S3(ctx, snapstore.S3Config{URL: u}); !errors.Is(err, snapstore.ErrBadURL) {
			t.Errorf("S3(%q) = %v, want ErrBadURL", u, err)
		}
	}
}

func TestNATS_SnapshotsGoToTheJetStreamObjectStore(t *testing.T) {
	n := testenv.NATS(t)
	objects, err := bus.EnsureObjectStore(context.Background(), n.JS, bus.ObjectStoreSnapshots, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := snapstore.NATS(objects, bus.ObjectStoreSnapshots)
	if got := s.String(); got != "object store "+bus.ObjectStoreSnapshots {
		t.Errorf("String() = %q", got)
	}
	roundTrip(t, s)
}
