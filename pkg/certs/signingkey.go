package certs

import (
	"crypto"
	"fmt"
)

// SigningKey is a key pair without a certificate, such as the one kube-apiserver signs
// service-account tokens with (--service-account-signing-key-file takes the private PEM,
// --service-account-key-file the public PEM).
type SigningKey struct {
	Key crypto.Signer
}

// NewSigningKey returns a new ECDSA P-256 signing key (ES256 tokens).
func NewSigningKey() (*SigningKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	return &SigningKey{Key: key}, nil
}

// ParseSigningKey parses a PEM private key (PKCS #8, SEC 1 or PKCS #1).
func ParseSigningKey(privatePEM []byte) (*SigningKey, error) {
	key, err := ParsePrivateKey(privatePEM)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return &SigningKey{Key: key}, nil
}

// PrivatePEM returns the private key as PEM encoded PKCS #8 ("PRIVATE KEY").
func (k *SigningKey) PrivatePEM() ([]byte, error) { return privateKeyPEM(k.Key) }

// PublicPEM returns the public key as PEM encoded PKIX ("PUBLIC KEY").
func (k *SigningKey) PublicPEM() ([]byte, error) { return publicKeyPEM(k.Key.Public()) }
