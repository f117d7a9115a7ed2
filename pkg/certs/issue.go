package certs

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"time"
)

// Usage says what a leaf certificate authenticates. Combine with |.
type Usage uint8

const (
	UsageClient       Usage = 1 << iota // TLS client authentication
	UsageServer                         // TLS server authentication
	UsageClientServer = UsageClient | UsageServer
)

func (u Usage) String() string {
	switch u {
	case UsageClient:
		return "client"
	case UsageServer:
		return "server"
	case UsageClientServer:
		return "client+server"
	}
	return fmt.Sprintf("Usage(%d)", uint8(u))
}

// backdate is how far NotBefore lies in the past, to tolerate clock skew between machines.
const backdate = time.Minute

// Request describes a leaf certificate to issue.
type Request struct {
	CommonName    string
	Organizations []string // for Kubernetes client certificates: the user's groups
	DNSNames      []string
	IPs           []net.IP
	Usage         Usage
	// Lifetime from now; capped at the issuing CA's own expiry.
	Lifetime time.Duration
}

func (r Request) validate() error {
	switch {
	case r.CommonName == "":
		return fmt.Errorf("%w: common name is empty", ErrInvalidRequest)
	case r.Usage == 0 || r.Usage&^UsageClientServer != 0:
		return fmt.Errorf("%w %q: usage must be client, server or both", ErrInvalidRequest, r.CommonName)
	case r.Lifetime <= 0:
		return fmt.Errorf("%w %q: lifetime must be positive", ErrInvalidRequest, r.CommonName)
	case r.Usage&UsageServer != 0 && len(r.DNSNames) == 0 && len(r.IPs) == 0:
		return fmt.Errorf("%w %q: a server certificate needs a DNS name or an IP", ErrInvalidRequest, r.CommonName)
	}
	return nil
}

// NewCA returns a new self-signed CA with an ECDSA P-256 key, valid for lifetime.
func NewCA(commonName string, lifetime time.Duration) (*KeyPair, error) {
	if commonName == "" || lifetime <= 0 {
		return nil, fmt.Errorf("%w: a CA needs a common name and a positive lifetime", ErrInvalidRequest)
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate %q: %w", commonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Issue signs a new leaf certificate for req with a fresh ECDSA P-256 key. ca must be a CA.
func (ca *KeyPair) Issue(req Request) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, fmt.Errorf("%w: no CA key pair", ErrNotCA)
	}
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNotCA, ca.Cert.Subject.CommonName)
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(req.Lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	var ext []x509.ExtKeyUsage
	if req.Usage&UsageServer != 0 {
		ext = append(ext, x509.ExtKeyUsageServerAuth)
	}
	if req.Usage&UsageClient != 0 {
		ext = append(ext, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate %q: %w", req.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate %q: %w", req.CommonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}
