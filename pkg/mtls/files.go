package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/reread"
)

// keyPairFile is a certificate and key on disk, parsed again when either file changes.
type keyPairFile struct {
	cert, key string

	mu    sync.Mutex
	stamp [2]os.FileInfo
	kp    *tls.Certificate
}

// get returns the pair as the files are now; while they do not form a valid pair (a
// rotation half done) it returns the previous one.
func (f *keyPairFile) get() (*tls.Certificate, error) {
	cs, cerr := os.Stat(f.cert)
	ks, kerr := os.Stat(f.key)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kp != nil && cerr == nil && kerr == nil && reread.Unchanged(cs, f.stamp[0]) && reread.Unchanged(ks, f.stamp[1]) {
		return f.kp, nil
	}
	kp, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		if f.kp != nil {
			return f.kp, nil
		}
		return nil, fmt.Errorf("management TLS: key pair %s: %w", f.cert, err)
	}
	f.kp, f.stamp = &kp, [2]os.FileInfo{cs, ks}
	return f.kp, nil
}

// caFile is a PEM bundle of CA certificates on disk, parsed again when it changes (and the
// previous pool kept while it holds none).
type caFile = reread.File[*x509.CertPool]

// openCAFile reads path's bundle now: it must hold a certificate.
func openCAFile(path string) (*caFile, error) {
	f, err := reread.New(path, func(b []byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, certs.ErrNoPEM
		}
		return pool, nil
	})
	if err != nil {
		return nil, fmt.Errorf("management TLS: CA %w", err)
	}
	return f, nil
}
