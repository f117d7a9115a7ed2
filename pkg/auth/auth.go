package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
)

// Role is what a token may do.
type Role string

// The roles.
const (
	// RoleViewer may read (GET, HEAD) everything but the secret-bearing routes.
	RoleViewer Role = "viewer"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
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
	// Role is viewer or admin.
	Role Role `json:"role"`
	// Clusters, when not empty, scopes the token to these clusters.
	Clusters []string `json:"clusters,omitempty"`
	// Grants let a viewer read more (Grants); an admin has them all.
	Grants []Grant `json:"grants,omitempty"`
}

// Config configures an Authenticator.
type Config struct {
	Tokens []Token
	// MetricsRequireAuth makes /metrics need a valid token (any role); by default it is open.
	MetricsRequireAuth bool
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
	entries     []entry
	metricsAuth bool
}

type entry struct {
	digest [sha256.Size]byte
	p      *Principal
}

// New validates cfg's tokens and returns an Authenticator for them. A configuration without
// a token is ErrNoTokens: an API nobody can call is a mistake, not a policy.
func New(cfg Config) (*Authenticator, error) {
	if len(cfg.Tokens) == 0 {
		return nil, ErrNoTokens
	}
	a := &Authenticator{metricsAuth: cfg.MetricsRequireAuth}
	seen := map[[sha256.Size]byte]string{}
	for i, t := range cfg.Tokens {
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
		a.entries = append(a.entries, entry{digest: d, p: &Principal{Name: name, Role: t.Role, Clusters: slices.Clone(t.Clusters), Grants: slices.Clone(t.Grants)}})
	}
	return a, nil
}

func validate(t Token) error {
	switch {
	case len(t.Token) < MinTokenLength:
		return fmt.Errorf("token must be at least %d characters", MinTokenLength)
	case strings.ContainsFunc(t.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("token must not contain spaces or control characters")
	case t.Role != RoleViewer && t.Role != RoleAdmin:
		return fmt.Errorf("role %q must be %q or %q", t.Role, RoleViewer, RoleAdmin)
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
	for _, e := range a.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = e.p
		}
	}
	return found, found != nil
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
