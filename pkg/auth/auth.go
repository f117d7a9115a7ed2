package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reread"
)

// Role is what a token may do.
type Role string

// The roles.
const (
	// RoleViewer may read (GET, HEAD) everything but the secret-bearing routes.
	RoleViewer Role = "viewer"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleMetrics may read /metrics and nothing else: Prometheus's token.
	RoleMetrics Role = "metrics"
)

// Grant lets a viewer read what a viewer does not by default (an admin has every grant).
type Grant string

// The grants.
const (
	// GrantLogs: the control-plane components' logs (GET .../components/{name}/logs), which
	// may hold what a request carried.
	GrantLogs Grant = "logs"
	// GrantConfig: the contents of node pools' config documents (spec.config[].content),
	// which may hold credentials the machines need; without it they are answered redacted.
	GrantConfig Grant = "config"
)

// Grants are every grant there is.
var Grants = []Grant{GrantLogs, GrantConfig}

// MinTokenLength is the shortest token accepted: tokens are secrets, not passwords to type.
const MinTokenLength = 16

// Token is one entry of a tokens file.
type Token struct {
	// Name identifies the token in logs (never the token itself); default "token-<n>".
	Name string `json:"name,omitempty"`
	// Token is the secret sent as "Authorization: Bearer <token>".
	Token string `json:"token"`
	// Role is viewer, admin or metrics.
	Role Role `json:"role"`
	// Clusters, when not empty, scopes the token to these clusters.
	Clusters []string `json:"clusters,omitempty"`
	// Grants let a viewer read more (Grants); an admin has them all.
	Grants []Grant `json:"grants,omitempty"`
}

// Config configures an Authenticator.
type Config struct {
	// Tokens are fixed for the Authenticator's life.
	Tokens []Token
	// AdminToken, when not "", is one more fixed token: unscoped, role admin, named
	// AdminTokenName.
	AdminToken string
	// TokensFile, when not "", is a tokens file (ParseTokens) read now and again whenever it
	// changes: a token added works, and a token removed (revoked) is refused, from the next
	// request, without a restart. A file that stops reading or parsing, or that would leave
	// no token at all, keeps the tokens as they were (and Logger says why, once per change).
	TokensFile string
	// TokenFiles each hold one bare token of a given name and role, re-read the same way.
	TokenFiles []TokenFile
	// MetricsRequireAuth makes /metrics need a valid token (any role); by default it is open.
	MetricsRequireAuth bool
	// Logger reports a tokens file that no longer loads; default slog.Default().
	Logger *slog.Logger
}

// Principal is who a request authenticated as. It never holds the token.
type Principal struct {
	Name     string
	Role     Role
	Clusters []string // empty: every cluster
	Grants   []Grant
}

// Has reports whether the principal may read what g guards: an admin always, a viewer with
// the grant.
func (p *Principal) Has(g Grant) bool {
	return p.Role == RoleAdmin || slices.Contains(p.Grants, g)
}

// Has reports whether the caller of ctx may read what g guards: true without a principal
// (no access control in front of the handler).
func Has(ctx context.Context, g Grant) bool {
	p, ok := FromContext(ctx)
	return !ok || p.Has(g)
}

// Scoped reports whether the principal is limited to a set of clusters.
func (p *Principal) Scoped() bool { return len(p.Clusters) > 0 }

// InScope reports whether the principal may reach cluster.
func (p *Principal) InScope(cluster string) bool {
	return !p.Scoped() || slices.Contains(p.Clusters, cluster)
}

// Authenticator checks bearer tokens and authorizes requests. It is safe for concurrent use.
type Authenticator struct {
	fixed       []Token
	files       []*reread.File[[]Token] // the tokens file, then the token files
	metricsAuth bool
	log         *slog.Logger

	mu      sync.Mutex
	entries []entry
	loaded  []Token // the files' tokens entries were built from
	failed  error   // the files' error last logged
}

type entry struct {
	digest [sha256.Size]byte
	p      *Principal
}

// New validates cfg's tokens (and reads its files) and returns an Authenticator for them. A
// configuration without a token is ErrNoTokens: an API nobody can call is a mistake, not a
// policy.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{fixed: slices.Clone(cfg.Tokens), metricsAuth: cfg.MetricsRequireAuth, log: cmp.Or(cfg.Logger, slog.Default())}
	if cfg.AdminToken != "" {
		a.fixed = append(a.fixed, Token{Name: AdminTokenName, Token: cfg.AdminToken, Role: RoleAdmin})
	}
	if cfg.TokensFile != "" {
		f, err := reread.New(cfg.TokensFile, ParseTokens)
		if err != nil {
			return nil, fmt.Errorf("tokens file %w", err)
		}
		a.files = append(a.files, f)
	}
	for _, tf := range cfg.TokenFiles {
		f, err := reread.New(tf.Path, tf.parse)
		if err != nil {
			return nil, fmt.Errorf("token file %w", err)
		}
		a.files = append(a.files, f)
	}
	fromFiles, _ := a.read()
	entries, err := build(fromFiles, a.fixed)
	if err != nil {
		if len(a.files) > 0 {
			return nil, fmt.Errorf("%s: %w", a.paths(), err)
		}
		return nil, err
	}
	a.entries, a.loaded = entries, fromFiles
	return a, nil
}

// TokenFile is a file holding one bare token (ParseToken), the token of a principal named
// Name with Role, unscoped: the shared secret of two programs (infrad and the local cloud;
// Prometheus and the daemons).
type TokenFile struct {
	Path string
	Name string
	Role Role
}

func (f TokenFile) parse(b []byte) ([]Token, error) {
	t, err := ParseToken(b)
	if err != nil {
		return nil, err
	}
	return []Token{{Name: f.Name, Token: t, Role: f.Role}}, nil
}

// read returns the files' tokens as they are now, or the first error.
func (a *Authenticator) read() ([]Token, error) {
	var tokens []Token
	for _, f := range a.files {
		t, err := f.Get()
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, t...)
	}
	return tokens, nil
}

func (a *Authenticator) paths() string {
	var ps []string
	for _, f := range a.files {
		ps = append(ps, f.Path())
	}
	return strings.Join(ps, ", ")
}

// build validates tokens (the files' first, then the fixed ones) into entries.
func build(fromFiles, fixed []Token) ([]entry, error) {
	tokens := append(slices.Clone(fromFiles), fixed...)
	if len(tokens) == 0 {
		return nil, ErrNoTokens
	}
	var entries []entry
	seen := map[[sha256.Size]byte]string{}
	for i, t := range tokens {
		name := t.Name
		if name == "" {
			name = fmt.Sprintf("token-%d", i+1)
		}
		if err := validate(t); err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrBadToken, name, err)
		}
		d := sha256.Sum256([]byte(t.Token))
		if other, dup := seen[d]; dup {
			return nil, fmt.Errorf("%w %q: the same token as %q", ErrBadToken, name, other)
		}
		seen[d] = name
		entries = append(entries, entry{digest: d, p: &Principal{Name: name, Role: t.Role, Clusters: slices.Clone(t.Clusters), Grants: slices.Clone(t.Grants)}})
	}
	return entries, nil
}

// current returns the entries as the files are now (one stat each per call; parsed again
// only when one changed), or the last good ones while one does not load.
func (a *Authenticator) current() []entry {
	if len(a.files) == 0 {
		return a.entries
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	tokens, err := a.read()
	if err == nil && !slices.EqualFunc(tokens, a.loaded, sameToken) {
		var entries []entry
		if entries, err = build(tokens, a.fixed); err == nil {
			a.entries, a.loaded = entries, tokens
			a.log.Info("API token files changed: their tokens are in effect", "files", a.paths(), "tokens", len(entries))
		} else {
			err = fmt.Errorf("%s: %w (the tokens in effect are kept)", a.paths(), err)
		}
	}
	if err != nil && (a.failed == nil || err.Error() != a.failed.Error()) {
		a.log.Error("API tokens file does not load; the tokens in effect are kept", "error", err)
	}
	a.failed = err
	return a.entries
}

func sameToken(x, y Token) bool {
	return x.Name == y.Name && x.Token == y.Token && x.Role == y.Role && slices.Equal(x.Clusters, y.Clusters) && slices.Equal(x.Grants, y.Grants)
}

func validate(t Token) error {
	switch {
	case len(t.Token) < MinTokenLength:
		return fmt.Errorf("token must be at least %d characters", MinTokenLength)
	case strings.ContainsFunc(t.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("token must not contain spaces or control characters")
	case t.Role != RoleViewer && t.Role != RoleAdmin && t.Role != RoleMetrics:
		return fmt.Errorf("role %q must be %q, %q or %q", t.Role, RoleViewer, RoleAdmin, RoleMetrics)
	}
	for _, c := range t.Clusters {
		if err := api.ValidateClusterName(c); err != nil {
			return fmt.Errorf("cluster %q: %v", c, err)
		}
	}
	for _, g := range t.Grants {
		if !slices.Contains(Grants, g) {
			return fmt.Errorf("grant %q must be one of %v", g, Grants)
		}
	}
	return nil
}

// Authenticate returns the principal of token. Every configured token is compared, in
// constant time over SHA-256 digests, whether or not one matched already.
func (a *Authenticator) Authenticate(token string) (*Principal, bool) {
	d := sha256.Sum256([]byte(token))
	var found *Principal
	for _, e := range a.current() {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = e.p
		}
	}
	return found, found != nil
}

// ParseToken reads a file holding one bare token (space around it ignored), as
// GenerateToken makes them. It is ErrBadToken when the token is too short or holds spaces.
func ParseToken(b []byte) (string, error) {
	t := strings.TrimSpace(string(b))
	if err := validate(Token{Token: t, Role: RoleAdmin}); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	return t, nil
}

// GenerateToken returns a fresh random token (130 bits, base32).
func GenerateToken() string { return rand.Text() }

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal the middleware authenticated, if any.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// Allowed reports whether the caller of ctx may see cluster: true without a principal (no
// access control in front of the handler) or for a principal whose scope holds it. Handlers
// that list clusters filter with it.
func Allowed(ctx context.Context, cluster string) bool {
	p, ok := FromContext(ctx)
	return !ok || p.InScope(cluster)
}
