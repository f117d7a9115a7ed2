package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"testing"
	"time"
)

func newTestCA(t *testing.T) *KeyPair {
	t.Helper()
	ca, err := NewCA("test-ca", 24*time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func TestNewCA_IsSelfSignedP256CA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("not a CA: IsCA=%v BasicConstraintsValid=%v KeyUsage=%v", c.IsCA, c.BasicConstraintsValid, c.KeyUsage)
	}
	if c.Subject.CommonName != "test-ca" {
		t.Errorf("CN = %q", c.Subject.CommonName)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key is %T, want ECDSA P-256", c.PublicKey)
	}
	checkValidity(t, c, before, 24*time.Hour)
	checkSerial(t, c)
}

func TestNewCA_RejectsBadInput(t *testing.T) {
	if _, err := NewCA("", time.Hour); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty CN: err = %v", err)
	}
	if _, err := NewCA("x", 0); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("zero lifetime: err = %v", err)
	}
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t)
	tests := []struct {
		name    string
		req     Request
		wantExt []x509.ExtKeyUsage
	}{
		{
			name:    "client with groups",
			req:     Request{CommonName: "admin", Organizations: []string{"system:masters"}, Usage: UsageClient, Lifetime: time.Hour},
			wantExt: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name: "server with SANs",
			req: Request{CommonName: "kube-apiserver", DNSNames: []string{"localhost", "kubernetes"},
				IPs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, Usage: UsageServer, Lifetime: time.Hour},
			wantExt: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name:    "both",
			req:     Request{CommonName: "etcd-peer", DNSNames: []string{"etcd-0"}, Usage: UsageClientServer, Lifetime: time.Hour},
			wantExt: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			kp, err := ca.Issue(tt.req)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			c := kp.Cert
			if c.IsCA {
				t.Error("leaf is a CA")
			}
			if c.Subject.CommonName != tt.req.CommonName || !slices.Equal(c.Subject.Organization, tt.req.Organizations) {
				t.Errorf("subject = %v", c.Subject)
			}
			if !slices.Equal(c.DNSNames, tt.req.DNSNames) {
				t.Errorf("DNSNames = %v, want %v", c.DNSNames, tt.req.DNSNames)
			}
			if !slices.EqualFunc(c.IPAddresses, tt.req.IPs, net.IP.Equal) {
				t.Errorf("IPs = %v, want %v", c.IPAddresses, tt.req.IPs)
			}
			if !slices.Equal(c.ExtKeyUsage, tt.wantExt) {
				t.Errorf("ExtKeyUsage = %v, want %v", c.ExtKeyUsage, tt.wantExt)
			}
			if kp.Key.Public().(*ecdsa.PublicKey).Curve != elliptic.P256() {
				t.Error("leaf key is not P-256")
			}
			checkValidity(t, c, before, tt.req.Lifetime)
			checkSerial(t, c)
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			for _, usage := range tt.wantExt {
				if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("verify for %v: %v", usage, err)
				}
			}
		})
	}
}

func TestIssue_CapsLifetimeAtCAExpiry(t *testing.T) {
	ca := newTestCA(t)
	kp, err := ca.Issue(Request{CommonName: "long", Usage: UsageClient, Lifetime: 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !kp.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("NotAfter = %v, want the CA's %v", kp.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestIssue_SerialsDiffer(t *testing.T) {
	ca := newTestCA(t)
	seen := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for range 20 {
		kp, err := ca.Issue(Request{CommonName: "c", Usage: UsageClient, Lifetime: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		s := kp.Cert.SerialNumber.String()
		if seen[s] {
			t.Fatalf("serial %s issued twice", s)
		}
		seen[s] = true
	}
}

func TestIssue_Rejects(t *testing.T) {
	ca := newTestCA(t)
	leaf, err := ca.Issue(Request{CommonName: "leaf", Usage: UsageClient, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		issuer *KeyPair
		req    Request
		want   error
	}{
		{"leaf as issuer", leaf, Request{CommonName: "x", Usage: UsageClient, Lifetime: time.Hour}, ErrNotCA},
		{"nil issuer", nil, Request{CommonName: "x", Usage: UsageClient, Lifetime: time.Hour}, ErrNotCA},
		{"no common name", ca, Request{Usage: UsageClient, Lifetime: time.Hour}, ErrInvalidRequest},
		{"no usage", ca, Request{CommonName: "x", Lifetime: time.Hour}, ErrInvalidRequest},
		{"unknown usage", ca, Request{CommonName: "x", Usage: 8, Lifetime: time.Hour}, ErrInvalidRequest},
		{"no lifetime", ca, Request{CommonName: "x", Usage: UsageClient}, ErrInvalidRequest},
		{"server without SANs", ca, Request{CommonName: "x", Usage: UsageServer, Lifetime: time.Hour}, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.issuer.Issue(tt.req); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestKeyPair_PEMRoundTrip(t *testing.T) {
	ca := newTestCA(t)
	kp, err := ca.Issue(Request{CommonName: "srv", DNSNames: []string{"localhost"}, Usage: UsageServer, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Fatalf("key PEM block = %v, want PRIVATE KEY", b)
	}
	// A chain after the leaf is ignored.
	got, err := ParseKeyPair(append(kp.CertPEM(), ca.CertPEM()...), keyPEM)
	if err != nil {
		t.Fatalf("ParseKeyPair: %v", err)
	}
	if !got.Cert.Equal(kp.Cert) || !got.Key.Public().(*ecdsa.PublicKey).Equal(kp.Key.Public()) {
		t.Fatal("round trip changed the key pair")
	}
	// The standard library accepts the PEM as a TLS certificate.
	if _, err := tls.X509KeyPair(kp.CertPEM(), keyPEM); err != nil {
		t.Fatalf("tls.X509KeyPair: %v", err)
	}
}

func TestParseKeyPair_AcceptsSEC1Keys(t *testing.T) {
	ca := newTestCA(t)
	der, err := x509.MarshalECPrivateKey(ca.Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if _, err := ParseKeyPair(ca.CertPEM(), sec1); err != nil {
		t.Fatalf("ParseKeyPair with an EC PRIVATE KEY: %v", err)
	}
}

func TestParseKeyPair_Rejects(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	otherKey, _ := other.KeyPEM()
	caKey, _ := ca.KeyPEM()
	tests := []struct {
		name      string
		cert, key []byte
		want      error
	}{
		{"mismatched key", ca.CertPEM(), otherKey, ErrKeyMismatch},
		{"no cert", nil, caKey, ErrNoPEM},
		{"key where cert expected", caKey, caKey, ErrNoPEM},
		{"no key", ca.CertPEM(), ca.CertPEM(), ErrNoPEM},
		{"garbage", []byte("hello"), []byte("world"), ErrNoPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseKeyPair(tt.cert, tt.key); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSigningKey(t *testing.T) {
	k, err := NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := k.PrivatePEM()
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := k.PublicPEM()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(pubPEM)
	if b == nil || b.Type != "PUBLIC KEY" {
		t.Fatalf("public PEM block = %v, want PUBLIC KEY", b)
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseSigningKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("token"))
	sig, err := parsed.Key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), digest[:], sig) {
		t.Fatal("signature by the parsed private key does not verify with the public PEM")
	}
}

func checkValidity(t *testing.T, c *x509.Certificate, issuedAfter time.Time, lifetime time.Duration) {
	t.Helper()
	// Certificates carry second precision.
	if d := issuedAfter.Sub(c.NotBefore); d < backdate-time.Second || d > backdate+5*time.Second {
		t.Errorf("NotBefore is %v before issuance, want about %v", d, backdate)
	}
	if d := c.NotAfter.Sub(issuedAfter); d < lifetime-time.Second || d > lifetime+5*time.Second {
		t.Errorf("NotAfter is %v after issuance, want about %v", d, lifetime)
	}
}

func checkSerial(t *testing.T, c *x509.Certificate) {
	t.Helper()
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v: want positive and at most 128 bits", c.SerialNumber)
	}
	if c.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %v has only %d bits; random 128-bit serials almost never do", c.SerialNumber, c.SerialNumber.BitLen())
	}
}
