package bus

import (
	"fmt"
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
}

// Embedded is a running in-process NATS JetStream server.
type Embedded struct {
	*server.Server
	opts *server.Options
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
	return &Embedded{Server: ns, opts: opts}, nil
}

// SetUsers replaces the users the server accepts (a server started with Users), as a
// nats-server reloading its configuration does: a removed user's connections are closed and
// its credentials refused from then on; a changed user's permissions apply at once.
func (e *Embedded) SetUsers(users []*server.NkeyUser) error {
	if len(e.opts.Nkeys) == 0 {
		return fmt.Errorf("embedded nats: %w", ErrNoAuth)
	}
	opts := e.opts.Clone()
	opts.Nkeys = users
	if err := e.ReloadOptions(opts.Clone()); err != nil {
		return fmt.Errorf("embedded nats: reload users: %w", err)
	}
	e.opts = opts
	return nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.ClientURL() }

// Stop shuts the server down and waits for it.
func (e *Embedded) Stop() {
	e.Shutdown()
	e.WaitForShutdown()
}
