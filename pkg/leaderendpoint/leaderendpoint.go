// Package leaderendpoint keeps a headless Service in the management cluster pointed at the
// leading replica of a daemon, so that a name stays valid when another replica takes over.
//
// infrad's load balancers and ignitiond's Ignition listeners listen in the leading replica
// only (pkg/leader). Under Kubernetes each replica is a pod with its own address, so a
// cluster endpoint recorded as the leader's pod address would be gone after a takeover.
// Instead the endpoint names a headless Service with no selector (deploy/k8s: infrad-endpoints)
// and the leader writes that Service's one EndpointSlice with its own address, at once when it
// starts leading and again every Interval, so DNS answers the name with the new leader's
// address a few seconds after a takeover. This is how kube-apiserver keeps the "kubernetes"
// Service at the apiservers that run; a standby writes nothing.
//
// The slice lists no ports: a headless Service's name resolves to its endpoints' addresses
// whatever port a client dials, and every cluster has its own port.
package leaderendpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultInterval is how often the leader writes the slice again (Config.Interval): it puts
// back a slice someone edited or deleted.
const DefaultInterval = 10 * time.Second

// ErrInvalidConfig is returned by New for a Config that names no Service, no usable address or
// no management kubeconfig.
var ErrInvalidConfig = errors.New("leader endpoint: invalid config")

// Config is the Service a leader keeps at its address.
type Config struct {
	// Kubeconfig is the management cluster's kubeconfig file (daemon.Base's
	// ManagementKubeconfig; deploy/k8s's names the API server's Service, which resolves
	// without a kube-proxy where in-cluster config's ClusterIP would not). Needed unless
	// Client is set.
	Kubeconfig string
	// Namespace and Service name the headless Service (no selector) whose endpoint the
	// leader is.
	Namespace, Service string
	// Address is this replica's IP address (the pod's status.podIP).
	Address string
	// Owner is the daemon: the field manager of the writes and the slice's managed-by label.
	Owner string
	// Interval is how often the slice is written again (default DefaultInterval).
	Interval time.Duration
	// Log receives a line when the slice first names this replica, and every failed write.
	Log *slog.Logger
	// Client, when set, is used instead of one made from Kubeconfig (tests).
	Client kubernetes.Interface
}

// Publisher writes the Service's EndpointSlice while it runs (Start): run it only in the
// leading replica.
type Publisher struct {
	cfg  Config
	cs   kubernetes.Interface
	addr netip.Addr
}

// New checks cfg and makes the client.
func New(cfg Config) (*Publisher, error) {
	if cfg.Namespace == "" || cfg.Service == "" {
		return nil, fmt.Errorf("%w: namespace %q service %q", ErrInvalidConfig, cfg.Namespace, cfg.Service)
	}
	addr, err := netip.ParseAddr(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrInvalidConfig, cfg.Address, err)
	}
	if cfg.Owner == "" {
		cfg.Owner = "hostplane"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cs := cfg.Client
	if cs == nil {
		if cfg.Kubeconfig == "" {
			return nil, fmt.Errorf("%w: no management kubeconfig", ErrInvalidConfig)
		}
		rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("leader endpoint: management cluster: %w", err)
		}
		if cs, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("leader endpoint: management cluster: %w", err)
		}
	}
	return &Publisher{cfg: cfg, cs: cs, addr: addr}, nil
}

// SliceName is the name of the EndpointSlice the leader writes for service.
func SliceName(service string) string { return service + "-leader" }

// Start writes the slice at once and every Interval until ctx ends. A failed write is logged
// and tried again at the next tick: the daemon keeps working, and clients keep the address
// they resolved until the slice names this replica.
func (p *Publisher) Start(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	wrote := false
	for {
		if err := p.write(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.cfg.Log.Warn("leader endpoint: cannot write the EndpointSlice; retrying", "service", p.cfg.Namespace+"/"+p.cfg.Service, "err", err)
		} else if !wrote {
			wrote = true
			p.cfg.Log.Info("leader endpoint: the Service now names this replica", "service", p.cfg.Namespace+"/"+p.cfg.Service, "address", p.addr.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// write applies the slice (server-side apply, forced: a leader that took over owns it).
func (p *Publisher) write(ctx context.Context) error {
	family := discoveryv1.AddressTypeIPv4
	if p.addr.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := discoveryac.EndpointSlice(SliceName(p.cfg.Service), p.cfg.Namespace).
		WithLabels(map[string]string{
			discoveryv1.LabelServiceName: p.cfg.Service,
			discoveryv1.LabelManagedBy:   "hostplane-" + p.cfg.Owner,
		}).
		WithAddressType(family).
		WithEndpoints(discoveryac.Endpoint().
			WithAddresses(p.addr.String()).
			WithConditions(discoveryac.EndpointConditions().WithReady(true).WithServing(true).WithTerminating(false)))
	_, err := p.cs.DiscoveryV1().EndpointSlices(p.cfg.Namespace).Apply(ctx, slice, metav1.ApplyOptions{FieldManager: "hostplane-" + p.cfg.Owner, Force: true})
	return err
}
