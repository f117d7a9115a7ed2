// Package dev is `hostplane dev`: the whole of Hostplane in one process — an embedded NATS
// JetStream server, a local management kube-apiserver (etcd + kube-apiserver through the
// process supervisor), all six daemons, and one HTTP front door that serves every daemon's
// /v1 routes, an aggregate /healthz, /readyz and /metrics.
//
// Stopping it stops everything it started; starting it again on the same data dir resumes.
package dev

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/process"
	"github.com/hostplane/hostplane/services/clusterd"
	"github.com/hostplane/hostplane/services/componentd"
	"github.com/hostplane/hostplane/services/ignitiond"
	"github.com/hostplane/hostplane/services/infrad"
	"github.com/hostplane/hostplane/services/nodepoold"
	"github.com/hostplane/hostplane/services/pkid"
)

// Config configures the dev stack.
type Config struct {
	DataDir  string // default .hostplane
	Addr     string // front door; default 127.0.0.1:8080 ("127.0.0.1:0" picks a port)
	NATSPort int    // default 4222; -1 picks a free port
	// NoManagementAPIServer skips the local management kube-apiserver (tests of the daemons
	// alone).
	NoManagementAPIServer bool
	Logger                *slog.Logger
}

// Daemon is what the stack needs of each daemon.
type Daemon interface {
	Name() string
	Run(ctx context.Context) error
	Routes(r chi.Router)
	Ready(ctx context.Context) error
}

// Stack is a running dev stack.
type Stack struct {
	cfg        Config
	log        *slog.Logger
	NATS       *bus.Embedded
	Management *localkube.Cluster
	Daemons    []Daemon
	mgmtSup    *process.Supervisor
	server     *httpapi.Server
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	errs       chan error
}

// Start brings the stack up and returns once the front door listens (daemons become ready
// in the background; /healthz says when).
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = ".hostplane"
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.NATSPort == 0 {
		cfg.NATSPort = 4222
	}
	if cfg.Logger == nil {
		cfg.Logger = observe.NewLogger(os.Stderr, slog.LevelInfo)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	s := &Stack{cfg: cfg, log: cfg.Logger, errs: make(chan error, 16)}
	ok := false
	defer func() {
		if !ok {
			s.Stop(context.WithoutCancel(ctx))
		}
	}()

	s.NATS, err = bus.RunEmbedded(bus.EmbeddedConfig{Port: cfg.NATSPort, StoreDir: filepath.Join(dataDir, "nats")})
	if err != nil {
		return nil, err
	}
	s.log.Info("nats jetstream started", "url", s.NATS.URL(), "store", filepath.Join(dataDir, "nats"))

	if !cfg.NoManagementAPIServer {
		mdir := filepath.Join(dataDir, "management")
		s.mgmtSup, err = process.NewSupervisor(filepath.Join(mdir, "run"), s.log.With("component", "management"))
		if err != nil {
			return nil, err
		}
		s.log.Info("starting the management kube-apiserver", "dir", mdir)
		s.Management, err = localkube.Start(ctx, localkube.Config{Dir: mdir, Supervisor: s.mgmtSup, Name: "management", Log: s.log})
		if err != nil {
			return nil, fmt.Errorf("management kube-apiserver: %w", err)
		}
		s.log.Info("management kube-apiserver ready", "url", s.Management.URL, "kubeconfig", s.Management.KubeconfigPath)
	}

	registries := prometheus.Gatherers{}
	base := func() daemon.Base {
		reg := observe.NewRegistry()
		registries = append(registries, reg)
		return daemon.Base{NATSURL: s.NATS.URL(), DataDir: dataDir, Logger: s.log, Registry: reg}
	}
	builders := []func() (Daemon, error){
		func() (Daemon, error) { return clusterd.New(clusterd.Config{Base: base()}) },
		func() (Daemon, error) { return infrad.New(infrad.Config{Base: base()}) },
		func() (Daemon, error) { return pkid.New(pkid.Config{Base: base()}) },
		func() (Daemon, error) { return componentd.New(componentd.Config{Base: base()}) },
		func() (Daemon, error) { return nodepoold.New(nodepoold.Config{Base: base()}) },
		func() (Daemon, error) { return ignitiond.New(ignitiond.Config{Base: base()}) },
	}
	for _, b := range builders {
		d, err := b()
		if err != nil {
			return nil, err
		}
		s.Daemons = append(s.Daemons, d)
	}

	front := observe.NewRegistry()
	router := httpapi.NewRouter(httpapi.Config{
		Name: "frontdoor", Logger: s.log, Registry: front,
		Gatherer: append(prometheus.Gatherers{front}, registries...),
		Ready:    s.Ready,
		Health:   s.health,
	})
	for _, d := range s.Daemons {
		d.Routes(router)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	for _, d := range s.Daemons {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := d.Run(runCtx); err != nil {
				s.log.Error("daemon stopped with an error", "daemon", d.Name(), "err", err)
				s.errs <- fmt.Errorf("%s: %w", d.Name(), err)
			}
		}()
	}
	s.server = httpapi.NewServer(cfg.Addr, router, s.log)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.server.Start(runCtx); err != nil {
			s.errs <- fmt.Errorf("front door: %w", err)
		}
	}()
	if s.server.Addr() == "" {
		return nil, fmt.Errorf("front door could not listen on %s: %w", cfg.Addr, <-s.errs)
	}
	ok = true
	s.log.Info("hostplane dev is up", "api", "http://"+s.server.Addr(), "data_dir", dataDir)
	return s, nil
}

// URL is the front door's base URL.
func (s *Stack) URL() string { return "http://" + s.server.Addr() }

// Err delivers the first failure of a daemon or the front door.
func (s *Stack) Err() <-chan error { return s.errs }

// Ready reports nil once every daemon (and the management apiserver) is ready.
func (s *Stack) Ready(ctx context.Context) error {
	var errs []error
	for _, d := range s.Daemons {
		if err := d.Ready(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Stack) health(ctx context.Context) (any, bool) {
	out := map[string]string{}
	healthy := true
	for _, d := range s.Daemons {
		if err := d.Ready(ctx); err != nil {
			out[d.Name()] = err.Error()
			healthy = false
		} else {
			out[d.Name()] = "ready"
		}
	}
	if s.NATS != nil && s.NATS.Running() {
		out["nats"] = "ready"
	} else {
		out["nats"] = "not running"
		healthy = false
	}
	if s.Management != nil {
		out["management-apiserver"] = "ready"
		if p := s.Management.APIServer(); p == nil || p.Status().State != process.StateReady {
			out["management-apiserver"] = "not ready"
			healthy = false
		}
	}
	return out, healthy
}

// Stop stops everything the stack started: the front door and the daemons, every hosted
// control plane's processes, the management apiserver, then NATS.
func (s *Stack) Stop(ctx context.Context) {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, d := range s.Daemons {
		if sa, ok := d.(interface{ StopAll(context.Context) error }); ok {
			if err := sa.StopAll(ctx); err != nil {
				s.log.Warn("stop processes", "daemon", d.Name(), "err", err)
			}
		}
	}
	if s.mgmtSup != nil {
		if err := s.mgmtSup.StopAll(ctx); err != nil {
			s.log.Warn("stop management apiserver", "err", err)
		}
	}
	if s.NATS != nil {
		s.NATS.Stop()
	}
	s.log.Info("hostplane dev stopped")
}
