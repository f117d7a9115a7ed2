package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// Dir is a directory of PEM files holding a CA (CACertFile, CAKeyFile) and leaf key pairs it
// signed, each created once and kept across restarts while valid: the bootstrap material of
// a deployment (the NATS CA and its certificates, the management CA and its certificates).
// Keys are written mode 0600 and the directory is made 0700.
type Dir struct {
	Path string
	// CAName is the CA's common name.
	CAName string
	// CALifetime and LeafLifetime are how long what Dir issues is valid.
	CALifetime, LeafLifetime time.Duration
	// RenewBefore: a CA or leaf expiring within it is issued again.
	RenewBefore time.Duration
}

// The file names of a Dir's CA.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CA returns the directory's CA, issuing it (and writing ca.crt and ca.key) when it is
// missing, is not a CA or expires within RenewBefore.
func (d Dir) CA() (*KeyPair, error) {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return nil, err
	}
	return d.LoadOrIssue(CACertFile, CAKeyFile, func(kp *KeyPair) bool { return kp.Cert.IsCA },
		func() (*KeyPair, error) { return NewCA(d.CAName, d.CALifetime) })
}

// Leaf returns the leaf key pair in certName and keyName, issuing it from the CA (made first
// if need be) when it is missing, was not signed by the CA, does not name every host or
// expires within RenewBefore. hosts are DNS names or IP addresses; a client certificate
// may have none.
func (d Dir) Leaf(certName, keyName, commonName string, usage Usage, hosts []string) (*KeyPair, error) {
	ca, err := d.CA()
	if err != nil {
		return nil, err
	}
	req := HostRequest(commonName, usage, d.LeafLifetime, hosts)
	return d.LoadOrIssue(certName, keyName, func(kp *KeyPair) bool {
		if kp.Cert.CheckSignatureFrom(ca.Cert) != nil {
			return false
		}
		return !slices.ContainsFunc(hosts, func(h string) bool { return kp.Cert.VerifyHostname(h) != nil })
	}, func() (*KeyPair, error) { return ca.Issue(req) })
}

// HostRequest is a Request for hosts, each an IP address or a DNS name.
func HostRequest(commonName string, usage Usage, lifetime time.Duration, hosts []string) Request {
	req := Request{CommonName: commonName, Usage: usage, Lifetime: lifetime}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else {
			req.DNSNames = append(req.DNSNames, h)
		}
	}
	return req
}

// LoadOrIssue returns the key pair in the directory's certName and keyName when it parses,
// passes ok and does not expire within RenewBefore; else it issues one and writes it, the
// key first and each file atomically: a server reloading meanwhile sees the old pair or a
// mismatch it refuses, never half a file.
func (d Dir) LoadOrIssue(certName, keyName string, ok func(*KeyPair) bool, issue func() (*KeyPair, error)) (*KeyPair, error) {
	certPath, keyPath := filepath.Join(d.Path, certName), filepath.Join(d.Path, keyName)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	for _, err := range []error{cerr, kerr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if cerr == nil && kerr == nil {
		kp, err := ParseKeyPair(certPEM, keyPEM)
		if err == nil && ok(kp) && time.Until(kp.Cert.NotAfter) > d.RenewBefore {
			return kp, nil
		}
	}
	kp, err := issue()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certName, err)
	}
	keyPEM, err = kp.KeyPEM()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyName, err)
	}
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(certPath, kp.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	return kp, nil
}
