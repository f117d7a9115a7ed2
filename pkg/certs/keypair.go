package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// PEM block types.
const (
	certificateBlock = "CERTIFICATE"
	privateKeyBlock  = "PRIVATE KEY"    // PKCS #8
	ecKeyBlock       = "EC PRIVATE KEY" // SEC 1
	rsaKeyBlock      = "RSA PRIVATE KEY"
	publicKeyBlock   = "PUBLIC KEY" // PKIX
)

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CertPEM returns the certificate, PEM encoded.
func (kp *KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certificateBlock, Bytes: kp.Cert.Raw})
}

// KeyPEM returns the private key as PEM encoded PKCS #8 ("PRIVATE KEY").
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	return privateKeyPEM(kp.Key)
}

// ParseKeyPair parses a PEM certificate (the first CERTIFICATE block; any following blocks,
// such as a chain, are ignored) and its PEM private key (PKCS #8, SEC 1 or PKCS #1), and
// checks that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !samePublicKey(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%w %q", ErrKeyMismatch, cert.Subject.CommonName)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// ParseCertificate parses the first CERTIFICATE block of certPEM.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: want a %s", ErrNoPEM, certificateBlock)
		}
		if b.Type != certificateBlock {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		return cert, nil
	}
}

// ParsePrivateKey parses the first private key block of keyPEM (PKCS #8, SEC 1 or PKCS #1).
func ParsePrivateKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: want a private key", ErrNoPEM)
		}
		var (
			key any
			err error
		)
		switch b.Type {
		case privateKeyBlock:
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case ecKeyBlock:
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case rsaKeyBlock:
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", b.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("parse %s: key of type %T cannot sign", b.Type, key)
		}
		return signer, nil
	}
}

// newKey returns a new ECDSA P-256 private key.
func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	return key, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	if key == nil {
		return nil, errors.New("no private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: privateKeyBlock, Bytes: der}), nil
}

func publicKeyPEM(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: publicKeyBlock, Bytes: der}), nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
