package component

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hostplane/hostplane/pkg/process"
)

// probeTimeout backs up the probe's own context deadline.
const probeTimeout = 10 * time.Second

// tlsClient returns an HTTP client for probes: it trusts caPEM (or nothing is verified when
// caPEM is nil) and presents the client certificate when one is given. Connections are not
// kept: a probe runs rarely once the process is ready.
func tlsClient(caPEM, certPEM, keyPEM []byte) (*http.Client, error) {
	cfg, err := tlsConfig(caPEM, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout:   probeTimeout,
		Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true},
	}, nil
}

// tlsConfig trusts caPEM (anything when nil) and presents certPEM/keyPEM when given.
func tlsConfig(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM == nil {
		cfg.InsecureSkipVerify = true //nolint:gosec // kcm and scheduler serve self-signed certs; the probe only asks "are you up?"
	} else {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%w: CA bundle holds no certificate", ErrIncompletePKI)
		}
		cfg.RootCAs = pool
	}
	if len(certPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("probe client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func httpsURL(host string, port int, path string) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

// healthzProbe is kube-controller-manager's and kube-scheduler's probe: /healthz on their
// self-signed secure port (kube-controller-manager has no /readyz).
func healthzProbe(port int) (process.Probe, error) {
	c, err := tlsClient(nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return process.HTTPProbe(c, httpsURL(loopback, port, "/healthz"), nil), nil
}
