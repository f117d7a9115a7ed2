package certs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// ErrSealed is returned when sealed data cannot be opened (wrong key or tampered bytes).
var ErrSealed = errors.New("cannot open sealed data")

// ErrSealKeyFile is returned for a key file that holds no key or a malformed one.
var ErrSealKeyFile = errors.New("bad seal key file")

// SealKeySize is the size of a seal key: AES-256.
const SealKeySize = 32

// KeyProvider supplies the seal keys, the current one first and then the previous ones still
// accepted for opening: the plug point for a key management service. FileProvider is the one
// implementation. A KMS provider would keep the same keys wrapped (encrypted) by a KMS key
// and return them unwrapped by a KMS Decrypt call; the keys then live only in memory.
type KeyProvider interface {
	SealKeys(ctx context.Context) ([][]byte, error)
}

// FileProvider reads the keys from a file: one hex-encoded 32-byte key a line, the first
// seals, every one opens (blank lines and lines starting with # are skipped). A file with a
// single line is the key file of before key rotation. With Create, a missing file is created
// (mode 0600) with one random key, atomically: daemons starting together read the same key.
type FileProvider struct {
	Path   string
	Create bool
}

var _ KeyProvider = FileProvider{}

// SealKeys reads the file.
func (p FileProvider) SealKeys(context.Context) ([][]byte, error) {
	b, err := os.ReadFile(p.Path)
	if errors.Is(err, os.ErrNotExist) && p.Create {
		if err := createSealKey(p.Path); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create seal key: %w", err)
		}
		b, err = os.ReadFile(p.Path) // ours, or the one another daemon linked first
	}
	if err != nil {
		return nil, fmt.Errorf("read seal key: %w", err)
	}
	keys, err := parseSealKeys(b)
	if err != nil {
		return nil, fmt.Errorf("seal key file %s: %w", p.Path, err)
	}
	return keys, nil
}

func parseSealKeys(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := hex.DecodeString(line)
		if err != nil || len(key) != SealKeySize {
			return nil, fmt.Errorf("%w: line %d is not %d hex-encoded bytes", ErrSealKeyFile, n, SealKeySize)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrSealKeyFile)
	}
	return keys, nil
}

// RotateSealKeyFile puts a new random key first in the key file at path (which must exist),
// keeping the others: the new key seals, the old ones still open. It returns how many keys
// the file holds now.
func RotateSealKeyFile(path string) (int, error) {
	keys, err := FileProvider{Path: path}.SealKeys(context.Background())
	if err != nil {
		return 0, err
	}
	key := make([]byte, SealKeySize)
	if _, err := rand.Read(key); err != nil {
		return 0, err
	}
	keys = append([][]byte{key}, keys...)
	return len(keys), writeSealKeys(path, keys)
}

// PruneSealKeyFile keeps only the first (current) key of the key file at path: run it once
// every record is sealed with that key (pkid's reseal), or what older keys sealed no longer
// opens. It returns how many keys it removed.
func PruneSealKeyFile(path string) (int, error) {
	keys, err := FileProvider{Path: path}.SealKeys(context.Background())
	if err != nil {
		return 0, err
	}
	if len(keys) == 1 {
		return 0, nil
	}
	return len(keys) - 1, writeSealKeys(path, keys[:1])
}

func writeSealKeys(path string, keys [][]byte) error {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(hex.EncodeToString(k) + "\n")
	}
	return atomicfile.Write(path, []byte(b.String()), 0o600)
}

// Refresh intervals of a SealKey with a provider: the keys are read again when they are
// older than sealKeyMaxAge at a Seal or Open, and at once (at most once every
// sealKeyMissRetry) when nothing opens a value: another process may have sealed it with a key added since.
const (
	sealKeyMaxAge    = 30 * time.Second
	sealKeyMissRetry = time.Second
)

// SealKey is the keyring that encrypts private keys at rest with AES-256-GCM: the first key
// seals, every key opens (a value carries no key id; each key is tried, and GCM's
// authentication tells the right one). With a provider, the keys are read again from it
// (Reload, and on their own as said by sealKeyMaxAge), so a rotated key file takes effect
// without a restart. It is safe for concurrent use.
type SealKey struct {
	provider KeyProvider

	mu     sync.RWMutex
	aeads  []cipher.AEAD
	loaded time.Time
	missAt time.Time // the last reload because nothing opened a value
}

// NewSealKey returns a SealKey of one 32-byte key, without a provider.
func NewSealKey(key []byte) (*SealKey, error) {
	aeads, err := newAEADs([][]byte{key})
	if err != nil {
		return nil, err
	}
	return &SealKey{aeads: aeads}, nil
}

// NewKeyring returns the SealKey of provider's keys.
func NewKeyring(ctx context.Context, provider KeyProvider) (*SealKey, error) {
	k := &SealKey{provider: provider}
	if err := k.Reload(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// LoadOrCreateSealKey is the keyring of the key file at path (FileProvider), creating the
// file with one random key when it does not exist.
func LoadOrCreateSealKey(path string) (*SealKey, error) {
	return NewKeyring(context.Background(), FileProvider{Path: path, Create: true})
}

func newAEADs(keys [][]byte) ([]cipher.AEAD, error) {
	var out []cipher.AEAD
	for _, key := range keys {
		if len(key) != SealKeySize {
			return nil, fmt.Errorf("seal key must be %d bytes, got %d", SealKeySize, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		out = append(out, aead)
	}
	return out, nil
}

// Reload reads the keys from the provider again (a no-op without one). On error the keys in
// use stay.
func (k *SealKey) Reload(ctx context.Context) error {
	if k.provider == nil {
		return nil
	}
	keys, err := k.provider.SealKeys(ctx)
	if err != nil {
		return err
	}
	aeads, err := newAEADs(keys)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.aeads, k.loaded = aeads, time.Now()
	k.mu.Unlock()
	return nil
}

// Len is the number of keys: 1, or more while a rotation is under way.
func (k *SealKey) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.aeads)
}

// refreshOlderThan reloads the keys when they were loaded longer than age ago; a failure
// keeps the keys in use (Reload reports it to whoever calls it).
func (k *SealKey) refreshOlderThan(age time.Duration) {
	if k.provider == nil {
		return
	}
	k.mu.RLock()
	stale := time.Since(k.loaded) > age
	k.mu.RUnlock()
	if stale {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Reload(ctx)
	}
}

func (k *SealKey) keys() []cipher.AEAD {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.aeads
}

// Seal encrypts plaintext with the current key; the nonce is prepended.
func (k *SealKey) Seal(plaintext []byte) []byte {
	k.refreshOlderThan(sealKeyMaxAge)
	aead := k.keys()[0]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plaintext, nil)
}

// Open decrypts what Seal produced, with whichever key sealed it.
func (k *SealKey) Open(sealed []byte) ([]byte, error) {
	out, _, err := k.OpenIndex(sealed)
	return out, err
}

// OpenIndex is Open that also says which key opened the value: 0 is the current key, more
// an older one (the value is to be sealed again before that key is removed).
func (k *SealKey) OpenIndex(sealed []byte) ([]byte, int, error) {
	k.refreshOlderThan(sealKeyMaxAge)
	out, i, err := open(k.keys(), sealed)
	if err != nil && k.provider != nil {
		k.mu.Lock()
		retry := time.Since(k.missAt) > sealKeyMissRetry
		if retry {
			k.missAt = time.Now()
		}
		k.mu.Unlock()
		if retry {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = k.Reload(ctx)
			cancel()
			out, i, err = open(k.keys(), sealed)
		}
	}
	return out, i, err
}

func open(aeads []cipher.AEAD, sealed []byte) ([]byte, int, error) {
	for i, aead := range aeads {
		n := aead.NonceSize()
		if len(sealed) < n {
			return nil, 0, ErrSealed
		}
		if out, err := aead.Open(nil, sealed[:n], sealed[n:], nil); err == nil {
			return out, i, nil
		}
	}
	return nil, 0, ErrSealed
}

// createSealKey writes a random key to a temporary file and links it to path; it fails
// with os.ErrExist when path exists already.
func createSealKey(path string) error {
	key := make([]byte, SealKeySize)
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
