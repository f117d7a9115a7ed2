package certs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
