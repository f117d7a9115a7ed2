package localcloud

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/auth"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultDir and the socket in it are cmd/localcloud's defaults.
	DefaultDir        = ".hostplane/localcloud"
	DefaultSocketName = "localcloud.sock"
)

// Config configures a Cloud.
type Config struct {
	// Dir is the state directory: every machine lives under Dir/machines/<cluster>/<name>/.
	Dir string
	// Listen is where the API is served: "unix:///abs/path.sock" or "127.0.0.1:0" (a TCP
	// address; port 0 picks a free one). Empty: unix://<Dir>/localcloud.sock.
	Listen string
	// Logger receives the cloud's and every machine's logs; nil discards them.
	Logger *slog.Logger
	// HeartbeatInterval is how often a machine renews its Lease (default 10s); it re-posts its
	// Node status every StatusEvery heartbeats.
	HeartbeatInterval time.Duration
	// StatusEvery is how many heartbeats pass between two Node status posts (default 6).
	StatusEvery int
	// Registry receives the cloud's metrics (localcloud_machines and the HTTP ones), served
	// on /metrics; nil makes a fresh one.
	Registry *prometheus.Registry
	// TokenFile holds the bearer token every caller sends (auth.ParseToken; re-read when it
	// changes, so a rotated token takes effect at the next request): every route but /healthz
	// and /readyz, /metrics included, needs it. Empty: no access control, which Command
	// allows only on a unix socket (whose directory's mode guards it) or with
	// --insecure-no-auth.
	TokenFile string
}

func (c *Config) defaults() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Config.Dir is required", ErrInvalid)
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("localcloud: state dir %q: %w", c.Dir, err)
	}
	c.Dir = abs
	if c.Listen == "" {
		c.Listen = unixScheme + filepath.Join(c.Dir, DefaultSocketName)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.StatusEvery <= 0 {
		c.StatusEvery = 6
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}

// Cloud runs the machines of the local platform and serves their API.
type Cloud struct {
	cfg   Config
	log   *slog.Logger
	guest *guestPool          // shared transports to Ignition servers and guest apiservers
	auth  *auth.Authenticator // nil: no access control (Config.TokenFile empty)

	ready   chan struct{}
	readyMu sync.Once
	url     string

	mu       sync.Mutex
	running  bool
	runCtx   context.Context
	wg       sync.WaitGroup
	machines map[string]*machine // by key(cluster, name)
}

// New validates cfg and returns a Cloud; Run serves it.
func New(cfg Config) (*Cloud, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, machinesDir), 0o700); err != nil {
		return nil, fmt.Errorf("localcloud: state dir: %w", err)
	}
	c := &Cloud{
		cfg:      cfg,
		log:      cfg.Logger,
		guest:    newGuestPool(),
		ready:    make(chan struct{}),
		machines: map[string]*machine{},
	}
	if cfg.TokenFile != "" {
		a, err := auth.New(auth.Config{TokenFiles: []auth.TokenFile{{Path: cfg.TokenFile, Name: "infrad", Role: auth.RoleAdmin}},
			MetricsRequireAuth: true, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("localcloud: %w", err)
		}
		c.auth = a
	}
	if err := cfg.Registry.Register(collector{c}); err != nil {
		return nil, fmt.Errorf("localcloud: register metrics: %w", err)
	}
	return c, nil
}

// URL is the API's address for NewClient: "unix:///…" or "http://127.0.0.1:port". It blocks
// until Ready is closed, and is "" when Run could not listen.
func (c *Cloud) URL() string {
	<-c.ready
	return c.url
}

// Ready is closed once Run listens (or failed to: then Run returns the error).
func (c *Cloud) Ready() <-chan struct{} { return c.ready }

// Run resumes every recorded machine, serves the API until ctx ends, then stops every
// machine (their state stays on disk) and returns.
func (c *Cloud) Run(ctx context.Context) error {
	ln, url, err := c.listen(ctx)
	if err != nil {
		c.readyMu.Do(func() { close(c.ready) }) // URL() answers "": Run failed
		return err
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	recs, errs := loadRecords(c.cfg.Dir)
	for _, err := range errs {
		c.log.Error("machine record skipped", "error", err)
	}
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("localcloud: Run called twice")
	}
	c.running, c.runCtx = true, ctx
	for _, rec := range recs {
		m := c.newMachine(rec)
		c.machines[m.key()] = m
		c.startLocked(m)
	}
	c.mu.Unlock()
	c.log.Info("local cloud resumed its machines", "machines", len(recs), "dir", c.cfg.Dir)

	srv := &http.Server{
		Handler:           c.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c.url = url
	c.readyMu.Do(func() { close(c.ready) })
	c.log.Info("local cloud listening", "url", url)

	var runErr error
	select {
	case err := <-served:
		runErr = fmt.Errorf("localcloud: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()

	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
	cancel()
	c.wg.Wait()
	c.mu.Lock()
	c.machines = map[string]*machine{}
	c.mu.Unlock()
	c.guest.close()
	if strings.HasPrefix(url, unixScheme) {
		_ = os.Remove(strings.TrimPrefix(url, unixScheme))
	}
	c.log.Info("local cloud stopped")
	return runErr
}

func (c *Cloud) listen(ctx context.Context) (net.Listener, string, error) {
	var lc net.ListenConfig
	if path, ok := strings.CutPrefix(c.cfg.Listen, unixScheme); ok {
		if !filepath.IsAbs(path) {
			return nil, "", fmt.Errorf("%w: listen address %q is not unix:///absolute/path", ErrInvalid, c.cfg.Listen)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, "", fmt.Errorf("localcloud: socket dir: %w", err)
		}
		_ = os.Remove(path) // a stale socket of a previous run
		ln, err := lc.Listen(ctx, "unix", path)
		if err != nil {
			return nil, "", fmt.Errorf("localcloud: listen on %s: %w", path, err)
		}
		_ = os.Chmod(path, 0o600)
		return ln, unixScheme + path, nil
	}
	addr := strings.TrimPrefix(c.cfg.Listen, "http://")
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("localcloud: listen on %s: %w", addr, err)
	}
	return ln, "http://" + ln.Addr().String(), nil
}

// startLocked starts m's goroutines under the run context; c.mu is held.
func (c *Cloud) startLocked(m *machine) {
	c.wg.Go(m.run)
}

func key(cluster, name string) string { return cluster + "/" + name }

// lookup returns the machine or ErrNotFound; ErrNotRunning when Run is not serving.
func (c *Cloud) lookup(cluster, name string) (*machine, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil, ErrNotRunning
	}
	m, ok := c.machines[key(cluster, name)]
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, cluster, name)
	}
	return m, nil
}

// create starts a machine for spec, or returns the existing one's status.
func (c *Cloud) create(spec MachineSpec) (MachineStatus, error) {
	if err := validateSpec(spec); err != nil {
		return MachineStatus{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return MachineStatus{}, ErrNotRunning
	}
	if m, ok := c.machines[key(spec.Cluster, spec.Name)]; ok {
		if m.deleting {
			return MachineStatus{}, api.Errorf(api.CodeConflict, "machine %s/%s is being deleted; create it again once it is gone", spec.Cluster, spec.Name)
		}
		return m.updateUserData(spec.UserData), nil
	}
	if spec.ProviderID == "" {
		spec.ProviderID = api.ProviderID(spec.Cluster, spec.Name)
	}
	it, _ := api.LocalInstanceType(spec.InstanceType) // validated
	spec.InstanceType = it.Name
	spec.CapacityType = cmp.Or(spec.CapacityType, api.CapacityTypeOnDemand)
	if spec.Zone == "" {
		spec.Zone = c.spreadZoneLocked(spec, it.Zones)
	}
	rec := &record{
		Spec: spec,
		Status: MachineStatus{
			Cluster: spec.Cluster, Name: spec.Name, NodePool: spec.NodePool, ProviderID: spec.ProviderID,
			InstanceType: spec.InstanceType, Zone: spec.Zone, CapacityType: spec.CapacityType,
			State: StateBooting, CreatedAt: time.Now().UTC().Truncate(time.Second),
		},
		IP: machineIP(spec.Cluster, spec.Name),
	}
	m := c.newMachine(rec)
	if err := m.save(); err != nil {
		return MachineStatus{}, err
	}
	c.machines[m.key()] = m
	c.startLocked(m)
	c.log.Info("machine created", "cluster", spec.Cluster, "nodepool", spec.NodePool, "machine", spec.Name,
		"instanceType", spec.InstanceType, "zone", spec.Zone)
	return m.status(), nil
}

// spreadZoneLocked picks the zone of zones with the fewest machines of spec's cluster and
// pool (the first such zone on a tie), so a pool's machines spread over its type's zones.
// c.mu is held.
func (c *Cloud) spreadZoneLocked(spec MachineSpec, zones []string) string {
	count := map[string]int{}
	for _, m := range c.machines {
		if m.cluster == spec.Cluster && !m.deleting {
			m.mu.Lock()
			if m.rec.Spec.NodePool == spec.NodePool {
				count[m.rec.Spec.Zone]++
			}
			m.mu.Unlock()
		}
	}
	best := zones[0]
	for _, z := range zones[1:] {
		if count[z] < count[best] {
			best = z
		}
	}
	return best
}

// list returns the machines of cluster ("" = all), sorted by cluster and name.
func (c *Cloud) list(cluster string) ([]MachineStatus, error) {
	c.mu.Lock()
	ms := make([]*machine, 0, len(c.machines))
	for _, m := range c.machines {
		if cluster == "" || m.cluster == cluster {
			ms = append(ms, m)
		}
	}
	running := c.running
	c.mu.Unlock()
	if !running {
		return nil, ErrNotRunning
	}
	out := make([]MachineStatus, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.status())
	}
	slices.SortFunc(out, func(a, b MachineStatus) int {
		return strings.Compare(key(a.Cluster, a.Name), key(b.Cluster, b.Name))
	})
	return out, nil
}

// remove stops a machine and deletes its directory; an absent machine is ErrNotFound.
func (c *Cloud) remove(cluster, name string) error {
	m, err := c.lookup(cluster, name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	m.deleting = true // a Create of the name waits until it is gone
	c.mu.Unlock()
	m.stop()
	err = os.RemoveAll(m.dir)
	if err == nil {
		_ = os.Remove(filepath.Dir(m.dir)) // the cluster's dir, once empty
	}
	c.mu.Lock()
	if c.machines[m.key()] == m && err == nil {
		delete(c.machines, m.key())
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("localcloud: remove machine %s: %w", m.key(), err)
	}
	c.log.Info("machine deleted", "cluster", cluster, "machine", name)
	return nil
}

// fault injects fault on a machine.
func (c *Cloud) fault(cluster, name, fault string) (MachineStatus, error) {
	if !knownFault(fault) {
		return MachineStatus{}, fmt.Errorf("%w: %q", ErrUnknownFault, fault)
	}
	m, err := c.lookup(cluster, name)
	if err != nil {
		return MachineStatus{}, err
	}
	return m.inject(fault), nil
}

// reconfigure hands a machine a new Ignition stub to apply in place.
func (c *Cloud) reconfigure(cluster, name string, userData []byte) (MachineStatus, error) {
	if len(userData) == 0 {
		return MachineStatus{}, &api.Error{Code: api.CodeInvalid, Message: "userData is required",
			Fields: []api.FieldError{{Field: "userData", Detail: "required"}}}
	}
	m, err := c.lookup(cluster, name)
	if err != nil {
		return MachineStatus{}, err
	}
	return m.reconfigure(userData), nil
}

// power powers a machine off or a powered-off one on again (see Client.Power).
func (c *Cloud) power(cluster, name string, on bool) (MachineStatus, error) {
	m, err := c.lookup(cluster, name)
	if err != nil {
		return MachineStatus{}, err
	}
	if !on {
		return m.powerOff(), nil
	}
	st := m.status()
	if st.State != StateStopped || !st.PoweredOff {
		return st, nil // running, booting, or crashed (a crash stays)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running || m.deleting || c.machines[m.key()] != m {
		return st, nil
	}
	// The stopped machine's goroutines are gone: a new one takes over its record.
	m.mu.Lock()
	m.rec.Status.State, m.rec.Status.PoweredOff, m.rec.Status.Message = StateBooting, false, "powered on"
	rec := m.rec
	if err := m.save(); err != nil {
		m.mu.Unlock()
		return st, err
	}
	m.mu.Unlock()
	nm := c.newMachine(&rec)
	c.machines[nm.key()] = nm
	c.startLocked(nm)
	nm.log.Info("powered on")
	return rec.Status, nil
}
