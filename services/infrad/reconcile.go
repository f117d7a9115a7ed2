package infrad

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/infrad/lb"
	"github.com/hostplane/hostplane/services/infrad/ports"
)

// Event verbs infrad publishes (resource "infra"; listed in events.Published and
// docs/events.md).
const (
	VerbReady   = events.VerbInfraReady
	VerbDeleted = events.VerbInfraDeleted
)

// reconcile converges the infrastructure of one cluster (key = cluster name).
func (d *Daemon) reconcile(ctx context.Context, cluster string) (reconcile.Result, error) {
	log := d.Logger().With("cluster", cluster)
	c, _, err := d.clusters.Get(ctx, cluster)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return d.release(ctx, cluster, log)
	case err != nil:
		return reconcile.Result{}, err
	case c.DeletionTimestamp != nil:
		return d.release(ctx, cluster, log)
	}
	settled, err := d.ensure(ctx, c, log)
	if err == nil && !settled {
		// Machines wait for the control plane to come back (component events bring this
		// back too; the requeue is the safety net).
		return reconcile.Result{RequeueAfter: d.cfg.DeletePoll}, nil
	}
	return reconcile.Result{}, err
}

// loopbackOnly says whether the endpoints infrad records are on a loopback address, which
// only processes of this host reach.
func (d *Daemon) loopbackOnly() bool {
	host := cmp.Or(d.cfg.AdvertiseHost, d.cfg.Host)
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// supportedPlatform reports whether this infrad provides infrastructure for platform.
func supportedPlatform(platform string) bool { return slices.Contains(api.Platforms, platform) }

// ensure allocates the cluster's record if it has none, keeps the record's ports otherwise,
// runs or closes the load balancer, powers the machines off or on as the cluster hibernates
// or wakes, and marks the record ready. It reports whether the machines are settled.
func (d *Daemon) ensure(ctx context.Context, c *api.Cluster, log *slog.Logger) (bool, error) {
	name := c.Name
	if name == "" {
		return true, fmt.Errorf("cluster record has no name")
	}
	platform := c.Spec.Platform.Type
	if platform == "" {
		platform = api.PlatformLocal
	}
	inf, rev, err := d.infra.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		inf, rev = &api.Infra{ObjectMeta: api.ObjectMeta{Name: name}}, 0
	} else if err != nil {
		return true, err
	}
	before, _ := json.Marshal(inf)
	inf.Platform = platform
	inf.ClusterGeneration = c.Generation

	if !supportedPlatform(platform) {
		d.closeLB(name)
		inf.Ready = false
		inf.Message = fmt.Sprintf("platform %q is not supported; infrad provides %s", platform, strings.Join(api.Platforms, ", "))
		_, err := d.write(ctx, inf, rev, before, false, "")
		d.setReady(name, false)
		return true, err
	}

	if platform == api.PlatformDocker && d.loopbackOnly() {
		d.closeLB(name)
		inf.Ready = false
		inf.Message = fmt.Sprintf("platform %q: its machines are containers, which cannot reach endpoints on %s; run infrad with --endpoint-host "+
			"(HOSTPLANE_INFRA_HOST) at an address containers reach, such as Docker's bridge gateway (hostplane dev --infra-host 172.17.0.1)",
			platform, cmp.Or(d.cfg.AdvertiseHost, d.cfg.Host))
		_, err := d.write(ctx, inf, rev, before, false, "")
		d.setReady(name, false)
		return true, err
	}

	t := ports.TopologyFor(c.Spec.ControllerAvailabilityPolicy)
	allocated := false
	if !t.SatisfiedBy(inf) {
		// Held until the record is written, so a concurrent allocation sees these ports.
		d.allocMu.Lock()
		defer d.allocMu.Unlock()
		a := ports.NewAllocator(d.cfg.Host).Advertise(d.cfg.AdvertiseHost, d.cfg.IgnitionHost)
		if err := d.reserveRecorded(ctx, a, name); err != nil {
			return true, err
		}
		_, span := observe.StartSpan(ctx, "infrad allocate", attribute.String("hostplane.cluster", name),
			attribute.String("hostplane.policy", c.Spec.ControllerAvailabilityPolicy))
		err := a.Allocate(inf, t)
		observe.EndSpan(span, err)
		if err != nil {
			return true, err
		}
		allocated = true
		log.Info("allocated control-plane endpoint and ports", "endpoint", inf.Endpoint, "policy", c.Spec.ControllerAvailabilityPolicy)
	}
	if ports.Readvertise(inf, d.cfg.AdvertiseHost, d.cfg.IgnitionHost) {
		log.Info("endpoint hosts follow the advertised ones", "endpoint", inf.Endpoint, "ignition", inf.Ignition)
	}
	if d.cfg.APIServerService && ports.AtService(inf, api.KubeAPIServerHost(name), api.KubeAPIServerServicePort) {
		log.Info("apiservers recorded as the cluster's kube-apiserver Service", "apiServers", inf.APIServers)
	}

	if ports.IsLoadBalanced(inf) {
		err := d.ensureLB(name, inf)
		if err == nil {
			err = d.syncDraining(ctx, name)
		}
		if err != nil {
			inf.Ready = false
			inf.Message = "load balancer: " + err.Error()
			d.setReady(name, false)
			if _, werr := d.write(ctx, inf, rev, before, allocated, ""); werr != nil {
				return true, errors.Join(err, werr)
			}
			return true, fmt.Errorf("load balancer of %s: %w", name, err)
		}
	} else {
		d.closeLB(name)
	}

	settled, powerErr := d.syncMachinePower(ctx, c, log)
	inf.Hibernated = c.Spec.Hibernating() && settled && powerErr == nil
	if err := d.syncAsleep(ctx, c, inf); err != nil {
		powerErr = errors.Join(powerErr, err)
	}
	inf.Ready = true
	inf.Message = ""
	_, err = d.write(ctx, inf, rev, before, allocated, VerbReady)
	if err != nil {
		if allocated {
			d.closeLB(name) // the next attempt allocates again
		}
		return true, err
	}
	d.setReady(name, true)
	return settled, powerErr
}

// write stores inf if it differs from before (its JSON at revision rev; rev 0 creates it),
// bumping the record's generation when its allocation changed. verb, unless "", is the
// event recorded in the outbox before the write. It reports whether it wrote.
func (d *Daemon) write(ctx context.Context, inf *api.Infra, rev uint64, before []byte, allocated bool, verb string) (_ bool, err error) {
	after, err := json.Marshal(inf)
	if err != nil {
		return false, err
	}
	if rev != 0 && string(after) == string(before) {
		return false, nil
	}
	var sent outbox.Entry
	if verb != "" {
		if sent, err = d.record(ctx, inf.Name, verb); err != nil {
			return false, err
		}
	}
	defer func() {
		if err == nil {
			d.outbox.Send(ctx, sent)
		}
	}()
	if rev == 0 {
		_, err = d.infra.Create(ctx, inf.Name, inf)
		return err == nil, err
	}
	if allocated {
		inf.Generation++
	}
	_, err = d.infra.Update(ctx, inf.Name, inf, rev)
	return err == nil, err
}

// reserveRecorded marks every port another cluster's record holds as taken.
func (d *Daemon) reserveRecorded(ctx context.Context, a *ports.Allocator, except string) error {
	entries, err := d.infra.List(ctx)
	if err != nil {
		return fmt.Errorf("list infra records: %w", err)
	}
	for _, e := range entries {
		if e.Key != except {
			a.Reserve(ports.Of(e.Value)...)
		}
	}
	return nil
}

// release tears a deleting (or vanished) cluster's infrastructure down once componentd has
// removed every controlplane key of it: load balancer, then the record, then infra.deleted.
// Until then it keeps the load balancer running.
func (d *Daemon) release(ctx context.Context, cluster string, log *slog.Logger) (reconcile.Result, error) {
	inf, rev, err := d.infra.Get(ctx, cluster)
	if errors.Is(err, store.ErrNotFound) {
		d.closeLB(cluster)
		d.setReady(cluster, false)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	keys, err := d.components.Keys(ctx, api.ClusterPartsFilter(cluster))
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("list controlplane keys of %s: %w", cluster, err)
	}
	if len(keys) > 0 {
		// The control plane still runs (componentd keeps it while the node pools' machines
		// go through it, and starts it again after a restart), so its endpoint stays: after
		// an infrad restart the load balancer opens again from the record.
		if ports.IsLoadBalanced(inf) {
			if err := d.ensureLB(cluster, inf); err != nil {
				return reconcile.Result{}, fmt.Errorf("load balancer of deleting %s: %w", cluster, err)
			}
			// A hibernated cluster being deleted runs its control plane again for the
			// deletion: the balancer forwards (and wakes nothing).
			d.mu.Lock()
			if b := d.lbs[cluster]; b != nil {
				b.SetAsleep(false)
			}
			d.mu.Unlock()
			if err := d.syncDraining(ctx, cluster); err != nil {
				return reconcile.Result{}, err
			}
		}
		msg := fmt.Sprintf("deleting: waiting for %d control-plane components to be deleted", len(keys))
		if inf.Message != msg {
			inf.Message = msg
			if _, err := d.infra.Update(ctx, cluster, inf, rev); err != nil {
				return reconcile.Result{}, err
			}
			log.Info("cluster is deleting; waiting for its control-plane components to go", "components", len(keys))
		}
		return reconcile.Result{RequeueAfter: d.cfg.DeletePoll}, nil
	}
	d.closeLB(cluster)
	sent, err := d.record(ctx, cluster, VerbDeleted)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.infra.Delete(ctx, cluster, rev); err != nil {
		return reconcile.Result{}, err
	}
	d.outbox.Send(ctx, sent)
	d.setReady(cluster, false)
	d.metrics.lb.Forget(cluster)
	log.Info("released the cluster's infrastructure", "endpoint", inf.Endpoint)
	return reconcile.Result{}, nil
}

// record stores the infra event verb about cluster in the outbox. It is called before the
// write the event is about (a failure leaves the record unwritten); the entry is sent once
// the write succeeded, and published by the relay otherwise.
func (d *Daemon) record(ctx context.Context, cluster, verb string) (outbox.Entry, error) {
	e, err := d.outbox.Record(ctx, cluster, events.ResourceInfra, verb, cluster, nil)
	if err != nil {
		return e, fmt.Errorf("record infra.%s of %s: %w", verb, cluster, err)
	}
	return e, nil
}

// ensureLB runs the cluster's load balancer on the record's endpoint in front of its
// apiservers, with the internal listener the record names (a HighlyAvailable cluster's, for
// the daemons), restarting it if any of them changed. The endpoint wakes the cluster
// (lb.Config.Wake, SetAsleep) and measures its activity when the daemons do not go through
// it: a single apiserver's balancer (they go to the apiserver's port) and a balancer with an
// internal listener (they go there). An HA record without one (written before it existed)
// gets it on this same reconcile, so that case is only a failed allocation's.
func (d *Daemon) ensureLB(cluster string, inf *api.Infra) error {
	// With an advertised host the record names it; the balancer listens on Host.
	host := inf.Endpoint.Host
	if d.cfg.AdvertiseHost != "" {
		host = d.cfg.Host
	}
	addr := net.JoinHostPort(host, strconv.Itoa(inf.Endpoint.Port))
	internal := ""
	if e := inf.InternalEndpoint; e != nil && e.Port != 0 {
		internal = net.JoinHostPort(host, strconv.Itoa(e.Port))
	}
	backends := make([]string, 0, len(inf.APIServers))
	for _, e := range inf.APIServers {
		backends = append(backends, net.JoinHostPort(e.Host, strconv.Itoa(e.Port)))
	}
	// Replicas recorded as one Service (ports.AtService) are one backend.
	backends = slices.Compact(backends)
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return errors.New("infrad is stopping")
	}
	old := d.lbs[cluster]
	d.mu.Unlock()
	if old != nil {
		if old.Matches(addr, internal, backends) {
			return nil
		}
		d.closeLB(cluster)
	}
	cfg := lb.Config{Cluster: cluster, Addr: addr, InternalAddr: internal, Backends: backends,
		HealthInterval: d.cfg.HealthInterval, Metrics: d.metrics.lb, Log: d.Logger()}
	if len(inf.APIServers) == 1 || internal != "" { // the daemons do not come through the endpoint
		cfg.Wake = func() error { return d.requestWake(cluster) }
		cfg.Now = d.clock().Now
	}
	b, err := lb.Start(cfg)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		_ = b.Close()
		return errors.New("infrad is stopping")
	}
	d.lbs[cluster] = b
	return nil
}

// syncDraining takes the kube-apiserver replicas componentd marked draining out of the
// cluster's load balancer (and puts the others back).
func (d *Daemon) syncDraining(ctx context.Context, cluster string) error {
	comp, _, err := d.components.Get(ctx, api.ComponentKey(cluster, api.ComponentKubeAPIServer))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	draining := map[int]bool{}
	for i, r := range comp.Status.Replicas {
		draining[i] = r.Draining
	}
	d.mu.Lock()
	b := d.lbs[cluster]
	d.mu.Unlock()
	if b != nil {
		b.SetDraining(draining)
	}
	return nil
}

// closeLB stops the cluster's load balancer, if it runs.
func (d *Daemon) closeLB(cluster string) {
	d.mu.Lock()
	b := d.lbs[cluster]
	delete(d.lbs, cluster)
	d.mu.Unlock()
	if b != nil {
		if err := b.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			d.Logger().Warn("close load balancer", "cluster", cluster, "err", err)
		}
	}
}

// setReady keeps the clusters gauge.
func (d *Daemon) setReady(cluster string, ready bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ready {
		d.ready[cluster] = true
	} else {
		delete(d.ready, cluster)
	}
	d.metrics.clusters.Set(float64(len(d.ready)))
}
