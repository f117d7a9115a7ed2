package ignitiond

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hostplane/hostplane/pkg/api"
)

// tokenBytes is the entropy of a bearer token; tokenLen its length in unpadded base64url.
const (
	tokenBytes = 32
	tokenLen   = 43
)

// newToken returns a fresh bearer token: 32 random bytes, unpadded base64url.
func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// wellFormed reports whether s can be a token newToken made: 43 base64url characters.
func wellFormed(s string) bool {
	if len(s) != tokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// bearer returns the token of an "Authorization: Bearer <token>" header set, if it is
// exactly one well-formed bearer token.
func bearer(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !wellFormed(tok) {
		return "", false
	}
	return tok, true
}

// mint returns a new token for a config hash and its inputs, valid for ttl from now, with
// a bootstrap token id of its own.
func mint(hash, release string, config []api.ConfigDocument, now time.Time, ttl time.Duration) api.IgnitionToken {
	return api.IgnitionToken{
		Token: newToken(), ConfigHash: hash, Release: release, Config: config,
		IssuedAt: now, ExpiresAt: now.Add(ttl), BootstrapTokenID: newBootstrapID(),
	}
}

// retire turns a replaced Current into a Previous valid for grace, never past its own
// expiry; an expired (or empty) token is dropped instead (nil).
func retire(old api.IgnitionToken, now time.Time, grace time.Duration) *api.IgnitionToken {
	if old.Token == "" || !now.Before(old.ExpiresAt) {
		return nil
	}
	until := now.Add(grace)
	if old.ExpiresAt.Before(until) {
		until = old.ExpiresAt
	}
	old.ValidUntil = &until
	return &old
}

// rotateAt is when t is due for rotation: half its lifetime.
func rotateAt(t api.IgnitionToken) time.Time {
	return t.IssuedAt.Add(t.ExpiresAt.Sub(t.IssuedAt) / 2)
}

// tokenRef is one indexed token and what it serves.
type tokenRef struct {
	key         string // record key "<cluster>.<nodepool>"
	cluster     string
	nodepool    string
	token       api.IgnitionToken
	previous    bool
	generation  int64 // the record's NodePoolGeneration
	bootstrapID string
}

// indexed is what the index holds for one record key.
type indexed struct {
	rev     uint64
	digests [][sha256.Size]byte
}

// tokenIndex finds the record of a bearer token. It is kept from a watch of the bucket (so
// it holds every record, after a restart too) and from the reconciler's own writes (so a
// token is served as soon as its record is written). A token is found by its SHA-256 and
// then compared in constant time.
type tokenIndex struct {
	onChange func(key string, rec *api.IgnitionTokens) // nil rec: the record is gone

	mu       sync.RWMutex
	byDigest map[[sha256.Size]byte]*tokenRef
	byKey    map[string]indexed
	synced   chan struct{}
	once     sync.Once
}

func newTokenIndex(onChange func(key string, rec *api.IgnitionTokens)) *tokenIndex {
	return &tokenIndex{
		onChange: onChange,
		byDigest: map[[sha256.Size]byte]*tokenRef{},
		byKey:    map[string]indexed{},
		synced:   make(chan struct{}),
	}
}

// put indexes rec (the record of key at revision rev) unless the index saw a later revision.
func (ix *tokenIndex) put(key string, rev uint64, rec *api.IgnitionTokens) {
	ix.mu.Lock()
	old, ok := ix.byKey[key]
	if ok && rev <= old.rev {
		ix.mu.Unlock()
		return
	}
	ix.unindex(old)
	cluster, np, _ := api.SplitPartKey(key)
	var digests [][sha256.Size]byte
	add := func(t api.IgnitionToken, previous bool) {
		if t.Token == "" {
			return
		}
		d := sha256.Sum256([]byte(t.Token))
		ix.byDigest[d] = &tokenRef{key: key, cluster: cluster, nodepool: np, token: t, previous: previous,
			generation: rec.NodePoolGeneration, bootstrapID: rec.BootstrapID(t)}
		digests = append(digests, d)
	}
	add(rec.Current, false)
	if rec.Previous != nil {
		add(*rec.Previous, true)
	}
	ix.byKey[key] = indexed{rev: rev, digests: digests}
	ix.mu.Unlock()
	if ix.onChange != nil {
		ix.onChange(key, rec)
	}
}

// remove drops key's tokens. rev is the deletion's revision, or 0 when unknown (a delete of
// this process: later revisions of the key are still indexed).
func (ix *tokenIndex) remove(key string, rev uint64) {
	ix.mu.Lock()
	old, ok := ix.byKey[key]
	if ok && rev != 0 && rev <= old.rev {
		ix.mu.Unlock()
		return
	}
	ix.unindex(old)
	ix.byKey[key] = indexed{rev: max(rev, old.rev)}
	ix.mu.Unlock()
	if ix.onChange != nil {
		ix.onChange(key, nil)
	}
}

func (ix *tokenIndex) unindex(old indexed) {
	for _, d := range old.digests {
		delete(ix.byDigest, d)
	}
}

// lookup finds token for a request to cluster's listener and says what it is (Token*).
func (ix *tokenIndex) lookup(cluster, token string, now time.Time) (tokenRef, string) {
	if !wellFormed(token) {
		return tokenRef{}, TokenMalformed
	}
	d := sha256.Sum256([]byte(token))
	ix.mu.RLock()
	ref, ok := ix.byDigest[d]
	var r tokenRef
	if ok {
		r = *ref
	}
	ix.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare([]byte(r.token.Token), []byte(token)) != 1 || r.cluster != cluster {
		return tokenRef{}, TokenUnknown
	}
	if r.previous {
		if r.token.ValidUntil == nil || !now.Before(*r.token.ValidUntil) {
			return tokenRef{}, TokenExpired
		}
		return r, TokenPrevious
	}
	if !now.Before(r.token.ExpiresAt) {
		return tokenRef{}, TokenExpired
	}
	return r, TokenCurrent
}

func (ix *tokenIndex) isSynced() bool {
	select {
	case <-ix.synced:
		return true
	default:
		return false
	}
}

// watch keeps the index from the pool records of kv ("<cluster>.<nodepool>") until ctx ends.
func (ix *tokenIndex) watch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) error {
	w, err := kv.Watch(ctx, "*.*") // the latest value of each key, then every change
	if err != nil {
		return fmt.Errorf("watch token records: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watch token records: %w", ErrWatchEnded)
			}
			if e == nil { // every current record was delivered
				ix.once.Do(func() { close(ix.synced) })
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				ix.remove(e.Key(), e.Revision())
				continue
			}
			var rec api.IgnitionTokens
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				log.Warn("token record does not decode; its tokens are not served", "key", e.Key(), "err", err)
				ix.remove(e.Key(), e.Revision())
				continue
			}
			ix.put(e.Key(), e.Revision(), &rec)
		}
	}
}
