package certs

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrSealed is returned when sealed data cannot be opened (wrong key or tampered bytes).
var ErrSealed = errors.New("cannot open sealed data")

// SealKey encrypts private keys at rest with AES-256-GCM.
type SealKey struct {
	aead cipher.AEAD
}

// NewSealKey returns a SealKey for a 32-byte key.
func NewSealKey(key []byte) (*SealKey, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("seal key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &SealKey{aead: aead}, nil
}

// LoadOrCreateSealKey reads a hex-encoded 32-byte key from path, creating the file (mode
// 0600) with a random key when it does not exist. Creation is atomic (a complete temporary
// file is hard-linked into place), so daemons starting together all read the same, whole key.
func LoadOrCreateSealKey(path string) (*SealKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := createSealKey(path); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create seal key: %w", err)
		}
		b, err = os.ReadFile(path) // ours, or the one another daemon linked first
	}
	if err != nil {
		return nil, fmt.Errorf("read seal key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("seal key %s is not hex: %w", path, err)
	}
	return NewSealKey(key)
}

// createSealKey writes a random key to a temporary file and links it to path; it fails
// with os.ErrExist when path exists already.
func createSealKey(path string) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".seal-key-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

// Seal encrypts plaintext; the nonce is prepended.
func (k *SealKey) Seal(plaintext []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return k.aead.Seal(nonce, nonce, plaintext, nil)
}

// Open decrypts what Seal produced.
func (k *SealKey) Open(sealed []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrSealed
	}
	out, err := k.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, ErrSealed
	}
	return out, nil
}
