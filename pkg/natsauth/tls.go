package natsauth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
)

// TLS is how a client of hostplane's NATS uses TLS, from PEM files: the CA that signed the
// server's certificate and, for mutual TLS, the client's own certificate and key. The zero
// value is no TLS (the client still upgrades to TLS if the server requires it, trusting the
// system's roots only).
type TLS struct {
	CAFile   string // HOSTPLANE_NATS_CA_FILE
	CertFile string // HOSTPLANE_NATS_CERT_FILE (mutual TLS)
	KeyFile  string // HOSTPLANE_NATS_KEY_FILE (mutual TLS)
}

// Options are the nats.go options of t: the one place a NATS client's TLS is built. The
// files are checked now, so a missing or broken one is an error at once rather than a
// connection retried forever, and read again at every (re)connection, so files replaced in
// place (a rotated certificate or CA bundle) take effect at the next one.
func (t TLS) Options() ([]nats.Option, error) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, fmt.Errorf("nats tls: %w", ErrTLSPair)
	}
	var opts []nats.Option
	if t.CAFile != "" {
		b, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("nats tls: CA: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("nats tls: CA %s: %w", t.CAFile, certs.ErrNoPEM)
		}
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if t.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, fmt.Errorf("nats tls: client certificate: %w", err)
		}
		opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
	}
	return opts, nil
}

// The files of a NATS TLS directory (GenerateTLS).
const (
	TLSCAFile   = certs.CACertFile
	TLSCAKey    = certs.CAKeyFile
	TLSCertFile = "server.crt"
	TLSKeyFile  = "server.key"
	// The cluster routes' certificate (GenerateRouteTLS): each member presents it both as a
	// server and as a client, so it carries both usages.
	TLSRouteCertFile = "route.crt"
	TLSRouteKeyFile  = "route.key"
)

// Lifetimes of what GenerateTLS issues, and how long before expiry it issues again.
const (
	tlsCALifetime     = 10 * 365 * 24 * time.Hour
	tlsServerLifetime = 365 * 24 * time.Hour
	tlsRenewBefore    = 30 * 24 * time.Hour
)

// TLSFiles is a NATS TLS directory: a CA (ca.crt, ca.key) and the server's certificate it
// signed (server.crt, server.key).
type TLSFiles struct{ Dir string }

// CAFile is the CA certificate clients trust.
func (f *TLSFiles) CAFile() string { return filepath.Join(f.Dir, TLSCAFile) }

// Client is what a client needs to verify the server (no client certificate).
func (f *TLSFiles) Client() TLS { return TLS{CAFile: f.CAFile()} }

// Server is the server's TLS for bus.EmbeddedConfig (no client certificates asked).
func (f *TLSFiles) Server() *bus.ServerTLS {
	return &bus.ServerTLS{CertFile: filepath.Join(f.Dir, TLSCertFile), KeyFile: filepath.Join(f.Dir, TLSKeyFile)}
}

// GenerateTLS makes dir hold a NATS CA and a server certificate it signed for hosts (IP
// addresses or DNS names). Both are created once and kept across restarts, like the seeds of
// Generate; the server certificate is issued again when it is missing, was not signed by the
// CA, does not name every host or expires within 30 days, and the CA when it is missing or
// expires within 30 days. Keys are mode 0600, the directory 0700. To rotate the server's
// certificate, delete server.crt and run GenerateTLS again; to rotate the CA, delete ca.crt.
func GenerateTLS(dir string, hosts ...string) (*TLSFiles, error) {
	return generateLeaf(dir, TLSCertFile, TLSKeyFile, "hostplane NATS server", certs.UsageServer, hosts)
}

// GenerateRouteTLS makes dir hold the NATS CA (as GenerateTLS does) and the certificate of
// the cluster routes, route.crt and route.key, for hosts: the names members dial each other
// by (a wildcard such as *.nats-headless covers every member of a StatefulSet). nats-server
// runs routes with mutual TLS, so it is both a server and a client certificate; it is kept
// and issued again like the server's.
func GenerateRouteTLS(dir string, hosts ...string) (*TLSFiles, error) {
	return generateLeaf(dir, TLSRouteCertFile, TLSRouteKeyFile, "hostplane NATS route", certs.UsageClientServer, hosts)
}

// generateLeaf makes dir hold the CA and a leaf certificate it signed for hosts, under
// certName and keyName, each kept while valid (certs.Dir).
func generateLeaf(dir, certName, keyName, commonName string, usage certs.Usage, hosts []string) (*TLSFiles, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("nats tls: %w", ErrTLSHosts)
	}
	d := certs.Dir{Path: dir, CAName: "hostplane NATS CA", CALifetime: tlsCALifetime, LeafLifetime: tlsServerLifetime, RenewBefore: tlsRenewBefore}
	if _, err := d.Leaf(certName, keyName, commonName, usage, hosts); err != nil {
		return nil, fmt.Errorf("nats tls: %w", err)
	}
	return &TLSFiles{Dir: dir}, nil
}
