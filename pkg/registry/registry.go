// Package registry runs the OCI registry real guest nodes pull their images from: the CNCF
// Distribution registry (built by tools/registry/build.sh into the release cache) as a
// supervised process, over TLS with a certificate of its own CA, behind basic
// authentication with one generated credential, storing blobs on the local file system.
//
// Everything lives in one directory: tls/ (ca.crt, ca.key, registry.crt, registry.key),
// htpasswd, password (mode 0600), config.yml, data/ (the storage) and the process state.
// Starting again on the same directory keeps the CA, the credential and the images.
package registry

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/pkg/release"
)

// Version is the Distribution registry tools/registry/build.sh builds.
const Version = "v3.1.2"

// Username is the registry's one user; its password is generated at the first start.
const Username = "hostplane"

// ErrNotBuilt: the registry binary is not in the cache.
var ErrNotBuilt = errors.New("the registry is not built")

// BinaryPath is where tools/registry/build.sh puts the registry.
func BinaryPath() string {
	return filepath.Join(release.CacheDir(), "registry", Version, "registry")
}

// Config says where the registry runs.
type Config struct {
	// Dir holds its state (see the package doc).
	Dir string
	// Host is the address it listens on and its certificate names; Port 0 picks a free one
	// (kept in Dir for the next start).
	Host string
	Port int
	Log  *slog.Logger
}

// Registry is a running registry.
type Registry struct {
	cfg      Config
	addr     string // host:port
	ca       []byte
	password string
	sup      *process.Supervisor
	proc     *process.Process
}

// Start starts the registry (or adopts the one a previous start left running with the same
// configuration) and returns once it answers an authenticated GET /v2/.
func Start(ctx context.Context, cfg Config) (*Registry, error) {
	bin := BinaryPath()
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("%w: no %s; build it with `make registry` (tools/registry/build.sh)", ErrNotBuilt, bin)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o700); err != nil {
		return nil, err
	}
	port, err := keptPort(filepath.Join(cfg.Dir, "port"), cfg.Host, cfg.Port)
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(port))}
	dir := certs.Dir{Path: filepath.Join(cfg.Dir, "tls"), CAName: "hostplane registry CA",
		CALifetime: 10 * 365 * 24 * time.Hour, LeafLifetime: 365 * 24 * time.Hour, RenewBefore: 30 * 24 * time.Hour}
	ca, err := dir.CA()
	if err != nil {
		return nil, fmt.Errorf("registry CA: %w", err)
	}
	if _, err := dir.Leaf("registry.crt", "registry.key", "hostplane registry", certs.UsageServer, []string{cfg.Host}); err != nil {
		return nil, fmt.Errorf("registry certificate: %w", err)
	}
	r.ca = ca.CertPEM()
	if r.password, err = password(filepath.Join(cfg.Dir, "password")); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.password), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, "htpasswd"), []byte(Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	conf := filepath.Join(cfg.Dir, "config.yml")
	if err := os.WriteFile(conf, []byte(r.config()), 0o600); err != nil {
		return nil, err
	}
	if r.sup, err = process.NewSupervisor(filepath.Join(cfg.Dir, "run"), cfg.Log); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.ca)
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	r.proc, err = r.sup.Start(ctx, process.Spec{
		Name: "registry", Path: bin, Args: []string{"serve", conf},
		Probe: process.HTTPProbe(probe, r.URL()+"/v2/", http.Header{"Authorization": {r.BasicAuth()}}),
	})
	if err != nil {
		return nil, err
	}
	if err := r.proc.WaitReady(ctx); err != nil {
		_ = r.Stop(context.Background())
		return nil, fmt.Errorf("the registry at %s never answered: %w", r.addr, err)
	}
	cfg.Log.Info("registry ready", "addr", r.addr, "dir", cfg.Dir)
	return r, nil
}

// config is the registry's configuration: TLS, htpasswd authentication, file-system storage
// with deletes allowed, no debug server, no upload purging surprises.
func (r *Registry) config() string {
	d := r.cfg.Dir
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  formatter: text
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
  tls:
    certificate: %q
    key: %q
auth:
  htpasswd:
    realm: hostplane
    path: %q
`, filepath.Join(d, "data"), r.addr, filepath.Join(d, "tls", "registry.crt"), filepath.Join(d, "tls", "registry.key"), filepath.Join(d, "htpasswd"))
}

// Host is "host:port", the name images carry ("<host:port>/hostplane/pause:3.10").
func (r *Registry) Host() string { return r.addr }

// URL is the registry's https base URL.
func (r *Registry) URL() string { return "https://" + r.addr }

// CAPEM is the CA that signs the registry's certificate.
func (r *Registry) CAPEM() []byte { return r.ca }

// Credentials are the registry user's name and password.
func (r *Registry) Credentials() (string, string) { return Username, r.password }

// BasicAuth is the Authorization header value of the registry user.
func (r *Registry) BasicAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(Username+":"+r.password))
}

// Stop stops the registry process.
func (r *Registry) Stop(ctx context.Context) error {
	if r.sup == nil {
		return nil
	}
	return r.sup.StopAll(ctx)
}

// password returns the password kept in path, generating it on the first start.
func password(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 24)
	_, _ = rand.Read(buf)
	p := base64.RawURLEncoding.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(p+"\n"), 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// keptPort is the port in path, else port, else a free one on host; it is written to path.
func keptPort(path, host string, port int) (int, error) {
	if port == 0 {
		if b, err := os.ReadFile(path); err == nil {
			port, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if port == 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("a port for the registry on %s: %w", host, err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	return port, os.WriteFile(path, []byte(strconv.Itoa(port)+"\n"), 0o600)
}
