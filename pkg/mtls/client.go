package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
)

// ClientConfig is the TLS of a client of the daemons' admin ports (the gateway).
type ClientConfig struct {
	// CAFile is the management CA the daemons' certificates are verified with; "" uses the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate presented (the gateway's).
	CertFile, KeyFile string
}

// Enabled reports whether anything is configured.
func (c ClientConfig) Enabled() bool { return c.CAFile != "" || c.CertFile != "" }

// TLSConfig is the client side: the server's certificate is verified with the CA file as it
// is at each handshake, against the host name dialled, and the client certificate is read
// again when its files change.
func (c ClientConfig) TLSConfig() (*tls.Config, error) {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate file and its key file", ErrConfig)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CertFile != "" {
		kp := &keyPairFile{cert: c.CertFile, key: c.KeyFile}
		if _, err := kp.get(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	if c.CAFile == "" {
		return cfg, nil
	}
	ca, err := openCAFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	// The standard verification with a fixed pool would not see a rotated CA bundle: verify
	// here instead, exactly as crypto/tls does, with the pool of the moment.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("management TLS: the server presented no certificate")
		}
		pool, _ := ca.Get() // the last good pool while the file holds none
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, verr := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			DNSName: cs.ServerName, Roots: pool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		return verr
	}
	return cfg, nil
}

// Transport is http.DefaultTransport's settings with TLSConfig.
func (c ClientConfig) Transport() (*http.Transport, error) {
	cfg, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return t, nil
}
