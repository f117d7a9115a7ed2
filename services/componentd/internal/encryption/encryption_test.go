package encryption_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"path/filepath"
	"testing"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/services/componentd/internal/encryption"
)

func TestConfig_ListsAESCBCWithEveryKeyInOrderThenIdentity(t *testing.T) {
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	newKey, oldKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	keys := &api.EncryptionKeys{Type: api.SecretEncryptionAESCBC, Keys: []api.EncryptionKey{
		{Name: "key-new", Sealed: seal.Seal(newKey)},
		{Name: "key-old", Sealed: seal.Seal(oldKey)},
	}}
	b, err := encryption.Config(keys, seal)
	if err != nil {
		t.Fatal(err)
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if cfg.APIVersion != "apiserver.config.k8s.io/v1" || cfg.Kind != "EncryptionConfiguration" || len(cfg.Resources) != 1 {
		t.Fatalf("config:\n%s", b)
	}
	r := cfg.Resources[0]
	if len(r.Resources) != 1 || r.Resources[0] != "secrets" || len(r.Providers) != 2 ||
		r.Providers[0].AESCBC == nil || r.Providers[1].Identity == nil {
		t.Fatalf("want secrets encrypted by aescbc then identity:\n%s", b)
	}
	got := r.Providers[0].AESCBC.Keys
	want := []apiserverv1.Key{
		{Name: "key-new", Secret: base64.StdEncoding.EncodeToString(newKey)},
		{Name: "key-old", Secret: base64.StdEncoding.EncodeToString(oldKey)},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("aescbc keys = %+v, want %+v", got, want)
	}
}

func TestConfig_WithoutKeys_IsNothingAndBadKeysAreErrors(t *testing.T) {
	seal, err := certs.LoadOrCreateSealKey(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.LoadOrCreateSealKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range []*api.EncryptionKeys{nil, {Type: api.SecretEncryptionAESCBC}} {
		if b, err := encryption.Config(keys, seal); b != nil || err != nil {
			t.Errorf("Config(%+v) = %q, %v; want nothing", keys, b, err)
		}
	}
	key := func(b []byte) []api.EncryptionKey { return []api.EncryptionKey{{Name: "k", Sealed: b}} }
	if _, err := encryption.Config(&api.EncryptionKeys{Type: api.SecretEncryptionKMS, Keys: key(seal.Seal(make([]byte, 32)))}, seal); !errors.Is(err, encryption.ErrUnsupportedType) {
		t.Errorf("kms keys: %v, want ErrUnsupportedType", err)
	}
	if _, err := encryption.Config(&api.EncryptionKeys{Type: api.SecretEncryptionAESCBC, Keys: key(other.Seal(make([]byte, 32)))}, seal); err == nil {
		t.Error("a key sealed with another seal key was accepted")
	}
	if _, err := encryption.Config(&api.EncryptionKeys{Type: api.SecretEncryptionAESCBC, Keys: key(seal.Seal(make([]byte, 7)))}, seal); err == nil {
		t.Error("a 7-byte AES key was accepted")
	}
}
