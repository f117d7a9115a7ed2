package mtls

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// ServerConfig is the TLS of a daemon's admin port. The zero value is plain HTTP.
type ServerConfig struct {
	// CertFile and KeyFile are the daemon's server certificate and key
	// (HOSTPLANE_ADMIN_TLS_CERT_FILE, HOSTPLANE_ADMIN_TLS_KEY_FILE): set, the port is HTTPS only.
	CertFile, KeyFile string
	// ClientCAFile (HOSTPLANE_ADMIN_CLIENT_CA_FILE) is the CA whose client certificates the
	// daemon verifies: set, the API answers only a client certificate it signed for one of
	// ClientNames.
	ClientCAFile string
	// ClientNames are the common names allowed to call the API (default: ClientName, the
	// gateway's).
	ClientNames []string
	// AllowDirect (HOSTPLANE_ADMIN_ALLOW_DIRECT=true) accepts API calls without the gateway's
	// certificate too (a client certificate is still verified when one is presented).
	AllowDirect bool
}

// Enabled reports whether the admin port serves HTTPS.
func (c ServerConfig) Enabled() bool { return c.CertFile != "" }

// Validate checks the combination of settings.
func (c ServerConfig) Validate() error {
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("%w: the admin port's certificate needs both HOSTPLANE_ADMIN_TLS_CERT_FILE and HOSTPLANE_ADMIN_TLS_KEY_FILE", ErrConfig)
	case c.ClientCAFile != "" && c.CertFile == "":
		return fmt.Errorf("%w: HOSTPLANE_ADMIN_CLIENT_CA_FILE needs HOSTPLANE_ADMIN_TLS_CERT_FILE: client certificates need TLS", ErrConfig)
	}
	return nil
}

// TLSConfig is the server side: the certificate (and the client CA) read from disk now, and
// again whenever the files change, at the next handshake. The files must be valid now.
func (c ServerConfig) TLSConfig() (*tls.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, fmt.Errorf("%w: no certificate", ErrConfig)
	}
	kp := &keyPairFile{cert: c.CertFile, key: c.KeyFile}
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() },
	}
	if c.ClientCAFile == "" {
		return base, nil
	}
	ca, err := openCAFile(c.ClientCAFile)
	if err != nil {
		return nil, err
	}
	srv := base.Clone()
	srv.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, _ := ca.Get() // the last good pool while the file holds none
		cfg := base.Clone()
		// Asked, not required: the kubelet's probes and Prometheus present none. The
		// middleware requires it of the API.
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
		return cfg, nil
	}
	return srv, nil
}

// openPaths need no client certificate: probes, metrics and the API's description.
var openPaths = []string{httpapi.PathHealthz, httpapi.PathReadyz, httpapi.PathLeaderz, httpapi.PathMetrics, httpapi.PathOpenAPI}

// Middleware refuses, with a 403 problem, every request but those of openPaths that does not
// come with a verified client certificate for one of ClientNames, unless the daemon has no
// client CA or accepts direct calls. Use it before the bearer-token check.
func (c ServerConfig) Middleware(next http.Handler) http.Handler {
	if c.ClientCAFile == "" || c.AllowDirect {
		return next
	}
	names := c.ClientNames
	if len(names) == 0 {
		names = []string{ClientName}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(openPaths, r.URL.Path) || verifiedAs(r, names) {
			next.ServeHTTP(w, r)
			return
		}
		httpapi.WriteProblem(w, r, api.Errorf(api.CodeForbidden,
			"this daemon answers API calls only through the gateway (a client certificate of the management CA for %s); call the gateway's URL",
			strings.Join(names, ", ")))
	})
}

// verifiedAs reports whether r came over TLS with a client certificate the client CA
// verified, issued to one of names.
func verifiedAs(r *http.Request, names []string) bool {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return false
	}
	return slices.Contains(names, r.TLS.VerifiedChains[0][0].Subject.CommonName)
}
