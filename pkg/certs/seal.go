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
// 0600) with a random key when it does not exist.
func LoadOrCreateSealKey(path string) (*SealKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) { // another daemon created it first
			return LoadOrCreateSealKey(path)
		}
		if err != nil {
			return nil, fmt.Errorf("create seal key: %w", err)
		}
		if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return NewSealKey(key)
	}
	if err != nil {
		return nil, fmt.Errorf("read seal key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("seal key %s is not hex: %w", path, err)
	}
	if len(key) == 0 { // being written by another daemon right now
		return nil, fmt.Errorf("seal key %s is empty", path)
	}
	return NewSealKey(key)
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
