package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"sigs.k8s.io/yaml"
)

// Environment variables FromEnv reads.
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
//	  role: viewer        # viewer, admin or metrics (reads /metrics only)
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

// FromEnv builds an Authenticator from HOSTPLANE_TOKENS_FILE and HOSTPLANE_ADMIN_TOKEN. It
// returns nil and no error when neither is set.
func FromEnv(metricsRequireAuth bool) (*Authenticator, error) {
	file, admin := os.Getenv(EnvTokensFile), os.Getenv(EnvAdminToken)
	if file == "" && admin == "" {
		return nil, nil
	}
	return New(Config{TokensFile: file, AdminToken: admin, MetricsRequireAuth: metricsRequireAuth})
}

// LoadOrCreateTokenFile returns the token of path (ParseToken), creating the file with mode
// perm and a fresh token (GenerateToken) when it does not exist; an existing file with more
// permissions than perm is given perm. An existing file holding no valid token is an error:
// it is never overwritten.
func LoadOrCreateTokenFile(path string, perm fs.FileMode) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if token, err = ParseToken(b); err != nil {
			return "", false, fmt.Errorf("%s: %w; delete it to get a new token", path, err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&^perm != 0 {
			if err := os.Chmod(path, perm); err != nil {
				return "", false, err
			}
		}
		return token, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	token = GenerateToken()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", false, err
	}
	if err := f.Chmod(perm); err != nil { // whatever the umask
		f.Close()
		return "", false, err
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", false, err
	}
	if err := f.Close(); err != nil {
		return "", false, err
	}
	return token, true, nil
}
