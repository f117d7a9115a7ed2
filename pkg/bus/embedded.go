package bus

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	Host     string // default 127.0.0.1
	Port     int    // 0 → 4222; -1 → a random free port
	StoreDir string // JetStream file store; required (state survives restarts)
	Name     string // server name; default "hostplane"
	// Users, when set, are the only clients the server accepts: nkey users with their
	// permissions (pkg/natsauth's Credentials.ServerNkeys). Without them anyone may connect
	// and do anything.
	Users []*server.NkeyUser
	// Logger, when set, receives the server's log (permission violations are errors);
	// Trace adds every protocol message to it (for tests that record what clients do).
	Logger server.Logger
	Trace  bool
	// TLS, when set, makes the server accept TLS clients only (a plain-text client is
	// refused) and, with TLS.ClientCAFile, only clients with a certificate that CA signed.
	TLS *ServerTLS
}

// ServerTLS is an embedded server's TLS, from PEM files: read at start and again by
// Embedded.ReloadTLS.
type ServerTLS struct {
	CertFile string // the server's certificate (chain)
	KeyFile  string // its private key
	// ClientCAFile, when set, asks for mutual TLS: every client must present a certificate
	// issued by this CA, or the handshake fails.
	ClientCAFile string
}

// config is the server's tls.Config from the files.
func (t *ServerTLS) config() (*tls.Config, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, fmt.Errorf("embedded nats: %w", ErrTLSFiles)
	}
	c, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.ClientCAFile, Verify: t.ClientCAFile != "",
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: tls: %w", err)
	}
	return c, nil
}

// Embedded is a running in-process NATS JetStream server.
type Embedded struct {
	*server.Server
	mu       sync.Mutex // serialises reloads
	opts     *server.Options
	tls      *ServerTLS
	hasUsers bool // started with Users
}

// RunEmbedded starts a NATS server with JetStream on disk and waits until it accepts clients.
func RunEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats: StoreDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	if cfg.Name == "" {
		cfg.Name = "hostplane"
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		Trace:      cfg.Trace,
		Nkeys:      cfg.Users,
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, err
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify = true, tc, cfg.TLS.ClientCAFile != ""
		opts.TLSCert, opts.TLSKey, opts.TLSCaCert = cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile
		opts.TLSTimeout = tlsTimeout
	}
	ns, err := server.NewServer(opts.Clone())
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if cfg.Logger != nil {
		ns.SetLoggerV2(cfg.Logger, false, cfg.Trace, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats on %s:%d: %w", cfg.Host, cfg.Port, ErrNotReady)
	}
	return &Embedded{Server: ns, opts: opts, tls: cfg.TLS, hasUsers: len(cfg.Users) > 0}, nil
}

// tlsTimeout is how long (seconds) a client has to complete its TLS handshake.
const tlsTimeout = 2

// ReloadTLS reads the server's certificate, key and client CA files again (a server
// started with TLS) and applies them without a restart: new connections get the new
// certificate; open ones keep theirs.
func (e *Embedded) ReloadTLS() error {
	if e.tls == nil {
		return fmt.Errorf("embedded nats: %w", ErrNoTLS)
	}
	tc, err := e.tls.config()
	if err != nil {
		return err
	}
	return e.reload("tls", func(o *server.Options) { o.TLSConfig = tc })
}

// SetUsers replaces the users the server accepts (a server started with Users), as a
// nats-server reloading its configuration does: a removed user's connections are closed and
// its credentials refused from then on; a changed user's permissions apply at once.
func (e *Embedded) SetUsers(users []*server.NkeyUser) error {
	if !e.hasUsers {
		return fmt.Errorf("embedded nats: %w", ErrNoAuth)
	}
	return e.reload("users", func(o *server.Options) { o.Nkeys = users })
}

// reload applies change to a copy of the server's options, as a configuration reload.
func (e *Embedded) reload(what string, change func(*server.Options)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	opts := e.opts.Clone()
	change(opts)
	if err := e.ReloadOptions(opts.Clone()); err != nil {
		return fmt.Errorf("embedded nats: reload %s: %w", what, err)
	}
	e.opts = opts
	return nil
}

// URL is the client URL of the server: tls://host:port when it requires TLS.
func (e *Embedded) URL() string { return e.ClientURL() }

// Stop shuts the server down and waits for it.
func (e *Embedded) Stop() {
	e.Shutdown()
	e.WaitForShutdown()
}
