package pkid

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// sealedRecord is a PKI record with a value of every sealed kind, sealed with key.
func sealedRecord(name string, key *certs.SealKey) *api.ClusterPKI {
	return &api.ClusterPKI{
		ObjectMeta: api.ObjectMeta{Name: name},
		Certs: map[string]api.CertBundle{
			api.CertRootCA: {CertPEM: []byte("ca"), SealedKey: key.Seal([]byte(name + "/root-ca")), IsCA: true},
			api.CertAdmin:  {CertPEM: []byte("admin"), SealedKey: key.Seal([]byte(name + "/admin"))},
		},
		ServiceAccount:   api.KeyBundle{PublicPEM: []byte("pub"), SealedPriv: key.Seal([]byte(name + "/sa"))},
		SecretEncryption: &api.EncryptionKeys{Type: "aescbc", Keys: []api.EncryptionKey{{Name: "key-1", Sealed: key.Seal([]byte(name + "/enc"))}}},
		Kubeconfigs:      map[string][]byte{api.KubeconfigAdmin: key.Seal([]byte(name + "/kubeconfig"))},
	}
}

// sealedBy returns the index of the key that opened each sealed value of p, checking that
// each opens to what sealedRecord put there.
func sealedBy(t *testing.T, p *api.ClusterPKI, key *certs.SealKey) []int {
	t.Helper()
	var idx []int
	check := func(what string, sealed []byte) {
		plain, i, err := key.OpenIndex(sealed)
		if err != nil || string(plain) != p.Name+"/"+what {
			t.Errorf("%s %s: %q, %v", p.Name, what, plain, err)
		}
		idx = append(idx, i)
	}
	check("root-ca", p.Certs[api.CertRootCA].SealedKey)
	check("admin", p.Certs[api.CertAdmin].SealedKey)
	check("sa", p.ServiceAccount.SealedPriv)
	check("enc", p.SecretEncryption.Keys[0].Sealed)
	check("kubeconfig", p.Kubeconfigs[api.KubeconfigAdmin])
	return idx
}

func TestReseal_AfterACrashMidway_EveryRecordOpensAndARerunFinishes_ThenOnlyTheNewKeyIsNeeded(t *testing.T) {
	ctx := context.Background()
	n := testenv.NATS(t)
	_, adminJS := n.ConnectAs(t, natsauth.Admin)
	if _, err := bus.EnsureBucketReplicated(ctx, adminJS, bus.BucketPKI, 1); err != nil {
		t.Fatal(err)
	}
	_, js := n.ConnectAs(t, Name) // pkid's own identity writes its bucket
	kv, err := js.KeyValue(ctx, bus.BucketPKI)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New[api.ClusterPKI](kv)

	path := filepath.Join(t.TempDir(), "pki.key")
	oldKey, err := certs.LoadOrCreateSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	const records = 5
	for i := range records {
		name := fmt.Sprintf("c%d", i)
		if _, err := st.Create(ctx, name, sealedRecord(name, oldKey)); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := certs.RotateSealKeyFile(path); err != nil {
		t.Fatal(err)
	}
	ring, err := certs.LoadOrCreateSealKey(path) // new key first, old key second
	if err != nil {
		t.Fatal(err)
	}

	// A crash after two records: the context ends there.
	crashCtx, crash := context.WithCancel(ctx)
	written := 0
	got, err := Reseal(crashCtx, st, ring, func(string) {
		if written++; written == 2 {
			crash()
		}
	})
	if !errors.Is(err, context.Canceled) || got.Resealed != 2 {
		t.Fatalf("crashed reseal: %+v, %v; want 2 resealed and context.Canceled", got, err)
	}
	entries, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newSealed := 0
	for _, e := range entries {
		idx := sealedBy(t, e.Value, ring)
		for _, i := range idx[1:] {
			if i != idx[0] {
				t.Errorf("%s is sealed with both keys (%v): a record must be rewritten whole", e.Key, idx)
			}
		}
		if idx[0] == 0 {
			newSealed++
		}
	}
	if newSealed != 2 {
		t.Errorf("%d records sealed with the new key after the crash, want 2", newSealed)
	}

	got, err = Reseal(ctx, st, ring, nil)
	if err != nil || got != (api.ResealStatus{Keys: 2, Records: records, Resealed: 3, Current: 2}) {
		t.Fatalf("rerun: %+v, %v; want 3 resealed and 2 already current of 5", got, err)
	}
	if removed, err := certs.PruneSealKeyFile(path); err != nil || removed != 1 {
		t.Fatalf("prune: %d, %v", removed, err)
	}
	onlyNew, err := certs.LoadOrCreateSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if onlyNew.Len() != 1 {
		t.Fatalf("%d keys after prune", onlyNew.Len())
	}
	entries, err = st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		sealedBy(t, e.Value, onlyNew)
		if _, err := oldKey.Open(e.Value.Kubeconfigs[api.KubeconfigAdmin]); err == nil && oldKey.Len() == 1 {
			// oldKey reads the file again on a miss, so it now holds the new key: that is
			// the reload without a restart, not the old key opening a new seal.
			continue
		}
	}
	if v := n.Violations(); len(v) > 0 {
		t.Errorf("NATS permission violations: %v", v)
	}
}
