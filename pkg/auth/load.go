package auth

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Environment variables Load reads.
const (
	// EnvTokensFile names a tokens file (YAML or JSON).
	EnvTokensFile = "HOSTPLANE_TOKENS_FILE"
	// EnvAdminToken is one admin token, unscoped.
	EnvAdminToken = "HOSTPLANE_ADMIN_TOKEN"
)

// AdminTokenName is the name of the token given as a bare admin token (HOSTPLANE_ADMIN_TOKEN
// or a Config's AdminToken).
const AdminTokenName = "admin-token"

// ParseTokens reads a tokens file's content: a YAML or JSON list of entries, such as
//
//	# tokens.yaml
//	- name: ci            # optional, shown in logs
//	  token: 0123456789abcdef0123
//	  role: viewer        # viewer or admin
//	  clusters: [demo]    # optional scope
//
// Unknown fields are errors, so a typo ("cluster:") cannot silently widen a scope.
func ParseTokens(data []byte) ([]Token, error) {
	var tokens []Token
	if err := yaml.UnmarshalStrict(data, &tokens); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	return tokens, nil
}

// LoadFile reads a tokens file (see ParseTokens).
func LoadFile(path string) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: tokens file: %w", err)
	}
	tokens, err := ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return tokens, nil
}

// Load returns the tokens of tokensFile (when not "") followed by adminToken as an unscoped
// admin token (when not "").
func Load(tokensFile, adminToken string) ([]Token, error) {
	var tokens []Token
	if tokensFile != "" {
		t, err := LoadFile(tokensFile)
		if err != nil {
			return nil, err
		}
		tokens = t
	}
	if adminToken != "" {
		tokens = append(tokens, Token{Name: AdminTokenName, Token: adminToken, Role: RoleAdmin})
	}
	return tokens, nil
}

// FromEnv builds an Authenticator from HOSTPLANE_TOKENS_FILE and HOSTPLANE_ADMIN_TOKEN. It
// returns nil and no error when neither is set.
func FromEnv(metricsRequireAuth bool) (*Authenticator, error) {
	file, admin := os.Getenv(EnvTokensFile), os.Getenv(EnvAdminToken)
	if file == "" && admin == "" {
		return nil, nil
	}
	tokens, err := Load(file, admin)
	if err != nil {
		return nil, err
	}
	return New(Config{Tokens: tokens, MetricsRequireAuth: metricsRequireAuth})
}
