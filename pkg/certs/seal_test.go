package certs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealKey_RoundTripAndTamper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki.key")
	k, err := LoadOrCreateSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	sealed := k.Seal([]byte("private key"))
	if bytes.Contains(sealed, []byte("private key")) {
		t.Fatal("sealed bytes contain the plaintext")
	}
	again, err := LoadOrCreateSealKey(path) // another daemon reads the same key
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Open(sealed)
	if err != nil || string(got) != "private key" {
		t.Fatalf("open = %q, %v", got, err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := again.Open(sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("tampered open err = %v, want ErrSealed", err)
	}
	other, _ := LoadOrCreateSealKey(filepath.Join(t.TempDir(), "other.key"))
	if _, err := other.Open(k.Seal([]byte("x"))); !errors.Is(err, ErrSealed) {
		t.Fatalf("wrong key open err = %v, want ErrSealed", err)
	}
}

func TestLoadOrCreateSealKey_ConcurrentCallersGetTheSameWholeKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki.key")
	const n = 16
	keys := make(chan *SealKey, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			k, err := LoadOrCreateSealKey(path)
			keys <- k
			errs <- err
		}()
	}
	var first *SealKey
	sealed := []byte(nil)
	for range n {
		k, err := <-keys, <-errs
		if err != nil {
			t.Fatalf("a concurrent caller failed: %v", err)
		}
		if first == nil {
			first, sealed = k, k.Seal([]byte("x"))
			continue
		}
		if _, err := k.Open(sealed); err != nil {
			t.Fatal("two callers got different keys")
		}
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
}

func TestSealKeyFile_Rotation_NewKeySealsOldStillOpensUntilPruned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki.key")
	reader, err := LoadOrCreateSealKey(path) // another daemon, loaded before the rotation
	if err != nil {
		t.Fatal(err)
	}
	old := reader.Seal([]byte("old"))
	if n, err := RotateSealKeyFile(path); err != nil || n != 2 {
		t.Fatalf("rotate: %d keys, %v; want 2", n, err)
	}
	ring, err := LoadOrCreateSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := ring.Seal([]byte("new"))
	if _, i, err := ring.OpenIndex(fresh); err != nil || i != 0 {
		t.Errorf("a new seal opens with key %d, %v; want the current key 0", i, err)
	}
	if got, i, err := ring.OpenIndex(old); err != nil || i != 1 || string(got) != "old" {
		t.Errorf("an old seal: %q, key %d, %v; want it opened by the previous key 1", got, i, err)
	}
	// The reader loaded only the old key: a value sealed with the new one makes it read the
	// file again, without a restart.
	if got, err := reader.Open(fresh); err != nil || string(got) != "new" {
		t.Errorf("a keyring loaded before the rotation opens a new seal: %q, %v", got, err)
	}
	if n, err := PruneSealKeyFile(path); err != nil || n != 1 {
		t.Fatalf("prune removed %d, %v; want 1", n, err)
	}
	pruned, err := LoadOrCreateSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if pruned.Len() != 1 {
		t.Errorf("%d keys after prune, want 1", pruned.Len())
	}
	if _, err := pruned.Open(fresh); err != nil {
		t.Errorf("the current key's seal after prune: %v", err)
	}
	if _, err := pruned.Open(old); !errors.Is(err, ErrSealed) {
		t.Errorf("the removed key's seal after prune: %v, want ErrSealed", err)
	}
}

func TestFileProvider_RefusesAMalformedFile(t *testing.T) {
	for name, content := range map[string]string{"empty": "\n# only a comment\n", "short": "abcd\n", "not hex": strings.Repeat("zz", 32) + "\n"} {
		path := filepath.Join(t.TempDir(), "pki.key")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateSealKey(path); !errors.Is(err, ErrSealKeyFile) {
			t.Errorf("%s: err = %v, want ErrSealKeyFile", name, err)
		}
	}
}
