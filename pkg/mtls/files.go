package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"github.com/hostplane/hostplane/pkg/certs"
)

// sameFile reports whether a and b describe the same, unchanged file.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

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
	if f.kp != nil && cerr == nil && kerr == nil && sameFile(cs, f.stamp[0]) && sameFile(ks, f.stamp[1]) {
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

// poolFile is a PEM bundle of CA certificates on disk, parsed again when it changes.
type poolFile struct {
	path string

	mu    sync.Mutex
	stamp os.FileInfo
	pool  *x509.CertPool
}

// get returns the pool as the file is now, or the previous one while the file holds none.
func (f *poolFile) get() (*x509.CertPool, error) {
	st, serr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pool != nil && serr == nil && sameFile(st, f.stamp) {
		return f.pool, nil
	}
	b, err := os.ReadFile(f.path)
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(b) {
		err = certs.ErrNoPEM
	}
	if err != nil {
		if f.pool != nil {
			return f.pool, nil
		}
		return nil, fmt.Errorf("management TLS: CA %s: %w", f.path, err)
	}
	f.pool, f.stamp = pool, st
	return pool, nil
}
