package ignitiond

import (
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestNewToken_Is32RandomBytesOfBase64URL(t *testing.T) {
	a, b := newToken(), newToken()
	if !wellFormed(a) || !wellFormed(b) || a == b {
		t.Fatalf("tokens %q and %q", a, b)
	}
}

func TestBearer_AcceptsExactlyOneWellFormedBearerToken(t *testing.T) {
	tok := newToken()
	tests := []struct {
		name   string
		values []string
		ok     bool
	}{
		{"bearer", []string{"Bearer " + tok}, true},
		{"lower-case scheme", []string{"bearer " + tok}, true},
		{"no header", nil, false},
		{"two headers", []string{"Bearer " + tok, "Bearer " + tok}, false},
		{"basic", []string{"Basic " + tok}, false},
		{"no token", []string{"Bearer"}, false},
		{"short", []string{"Bearer " + tok[:42]}, false},
		{"long", []string{"Bearer " + tok + "A"}, false},
		{"bad character", []string{"Bearer " + tok[:42] + "="}, false},
		{"two spaces", []string{"Bearer  " + tok}, false},
	}
	for _, tt := range tests {
		got, ok := bearer(tt.values)
		if ok != tt.ok || (ok && got != tok) {
			t.Errorf("%s: bearer = %q, %v; want ok %v", tt.name, got, ok, tt.ok)
		}
	}
}

func TestRetire_KeepsAReplacedTokenForTheGraceButNeverPastItsExpiry(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	tok := mint("h", "1.34.4", nil, now.Add(-time.Hour), 2*time.Hour)
	p := retire(tok, now, 10*time.Minute)
	if p == nil || !p.ValidUntil.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("retire = %+v", p)
	}
	p = retire(tok, now, 3*time.Hour)
	if p == nil || !p.ValidUntil.Equal(tok.ExpiresAt) {
		t.Fatalf("a grace past the expiry: %+v", p)
	}
	if retire(tok, tok.ExpiresAt, time.Minute) != nil || retire(api.IgnitionToken{}, now, time.Minute) != nil {
		t.Fatal("an expired or empty token was kept")
	}
	if got := rotateAt(tok); !got.Equal(now) {
		t.Fatalf("rotateAt = %v, want half-life %v", got, now)
	}
}

func TestTokenIndex_LooksUpCurrentAndPreviousOfTheirClusterOnly(t *testing.T) {
	now := time.Now()
	cur := mint("new", "1.34.4", nil, now, time.Hour)
	old := mint("old", "1.33.7", nil, now.Add(-time.Minute), time.Hour)
	old = *retire(old, now, time.Minute)
	old.BootstrapTokenID = "" // a token of a record from before tokens had their own: the record's
	gone := mint("gone", "1.33.7", nil, now.Add(-time.Hour), time.Hour)
	gone = *retire(gone, now.Add(-time.Hour), time.Minute) // its grace ended long ago
	var changes []string
	ix := newTokenIndex(func(key string, rec *api.IgnitionTokens) { changes = append(changes, key) })
	ix.put("demo.workers", 2, &api.IgnitionTokens{Current: cur, Previous: &old, NodePoolGeneration: 3, BootstrapTokenID: "abcdef"})
	ix.put("demo.other", 3, &api.IgnitionTokens{Current: mint("x", "1.34.4", nil, now.Add(-2*time.Hour), time.Hour), Previous: &gone})

	tests := []struct {
		name, cluster, token, want string
	}{
		{"current", "demo", cur.Token, TokenCurrent},
		{"previous", "demo", old.Token, TokenPrevious},
		{"previous past its grace", "demo", gone.Token, TokenExpired},
		{"another cluster's listener", "prod", cur.Token, TokenUnknown},
		{"unknown", "demo", newToken(), TokenUnknown},
		{"malformed", "demo", "nope", TokenMalformed},
	}
	for _, tt := range tests {
		ref, got := ix.lookup(tt.cluster, tt.token, now)
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if got == TokenCurrent && (ref.nodepool != "workers" || ref.generation != 3 || ref.bootstrapID != cur.BootstrapTokenID || ref.token.ConfigHash != "new") {
			t.Errorf("%s: ref %+v", tt.name, ref)
		}
		if got == TokenPrevious && ref.bootstrapID != "abcdef" {
			t.Errorf("%s: bootstrap id %q, want the record's abcdef", tt.name, ref.bootstrapID)
		}
	}
	expired := ix.byDigestOf(t, "demo.other")
	if _, got := ix.lookup("demo", expired, now); got != TokenExpired {
		t.Errorf("an expired current token: %s", got)
	}

	// An older revision changes nothing; a removal drops every token of the key.
	ix.put("demo.workers", 1, &api.IgnitionTokens{Current: mint("stale", "1", nil, now, time.Hour)})
	if _, got := ix.lookup("demo", cur.Token, now); got != TokenCurrent {
		t.Fatalf("an older revision replaced the record: %s", got)
	}
	ix.remove("demo.workers", 0)
	for _, tok := range []string{cur.Token, old.Token} {
		if _, got := ix.lookup("demo", tok, now); got != TokenUnknown {
			t.Errorf("a removed record's token: %s", got)
		}
	}
	ix.put("demo.workers", 2, &api.IgnitionTokens{Current: cur}) // the watch replaying the old put
	if _, got := ix.lookup("demo", cur.Token, now); got != TokenUnknown {
		t.Errorf("a replayed revision revived a removed record: %s", got)
	}
	if strings.Join(changes, ",") != "demo.workers,demo.other,demo.workers" {
		t.Errorf("changes %v", changes)
	}
}

// byDigestOf returns the current token of key (test helper).
func (ix *tokenIndex) byDigestOf(t *testing.T, key string) string {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for _, ref := range ix.byDigest {
		if ref.key == key && !ref.previous {
			return ref.token.Token
		}
	}
	t.Fatalf("no current token of %s", key)
	return ""
}

func TestBootstrapAlphabet_DrawsOnlyTokenCharacters(t *testing.T) {
	for range 100 {
		id := newBootstrapID()
		if len(id) != bootstrapIDLen || strings.Trim(id, bootstrapAlphabet) != "" {
			t.Fatalf("id %q", id)
		}
	}
}

func TestPayloadCache_KeepsOnlyWhatTheRecordServes(t *testing.T) {
	c := newPayloadCache()
	key := func(cluster, pool, token string, gen int64) payloadKey {
		return payloadKey{cluster: cluster, nodepool: pool, hash: "h-" + token, token: token, generation: gen}
	}
	for _, k := range []payloadKey{
		key("demo", "workers", "new", 2), key("demo", "workers", "old", 2), key("demo", "workers", "new", 1),
		key("demo", "workers", "older", 2), key("demo", "other", "x", 1), key("prod", "workers", "new", 2),
		// The current token's hash under a token rotated away: its payload names that token.
		{cluster: "demo", nodepool: "workers", hash: "h-new", token: "rotated", generation: 2},
	} {
		c.put(k, []byte("x"))
	}
	prev := api.IgnitionToken{Token: "old", ConfigHash: "h-old"}
	c.keep("demo.workers", &api.IgnitionTokens{NodePoolGeneration: 2, Current: api.IgnitionToken{Token: "new", ConfigHash: "h-new"}, Previous: &prev})
	want := map[payloadKey]bool{key("demo", "workers", "new", 2): true, key("demo", "workers", "old", 2): true, key("demo", "other", "x", 1): true, key("prod", "workers", "new", 2): true}
	if len(c.entries) != len(want) {
		t.Fatalf("entries %v", c.entries)
	}
	for k := range want {
		if _, ok := c.get(k); !ok {
			t.Errorf("%v was dropped", k)
		}
	}
	c.keep("demo.other", nil)
	c.dropCluster("prod")
	if len(c.entries) != 2 {
		t.Fatalf("entries %v", c.entries)
	}
}
