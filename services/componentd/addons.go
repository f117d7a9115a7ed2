package componentd

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/guest"
	"github.com/hostplane/hostplane/services/componentd/internal/addons"
)

// DefaultDNSImage is Config.DNSImage's default: the CoreDNS kubeadm deploys with Kubernetes
// 1.34 (hostplane dev pushes its own build, tools/coredns, to its registry and uses that).
const DefaultDNSImage = "registry.k8s.io/coredns/coredns:v1.12.1"

const (
	// addonsTimeout bounds one application of a cluster's addons.
	addonsTimeout = 15 * time.Second
	// addonsRefresh: applied addons are applied again this often, so that an object someone
	// deleted in the guest comes back.
	addonsRefresh = 10 * time.Minute
	// addonsRetry is the wait after a failed application.
	addonsRetry = 5 * time.Second
)

// addonState remembers, per cluster, what was last applied and when.
type addonState struct {
	mu      sync.Mutex
	applied map[string]addonApplied
}

type addonApplied struct {
	hash string
	at   time.Time
	// retryAt: after a failure to apply configuration retryFor (a hash, or addonsInvalid),
	// not before then: every reconcile of the cluster would otherwise try again at once.
	retryAt  time.Time
	retryFor string
}

// wantsAddons says whether cluster c gets the guest addons: clusters whose nodes are real
// machines (platforms docker and none). The local platform's simulated nodes run no
// container.
func wantsAddons(c *api.Cluster) bool { return api.RealNodes(c.Spec.Platform.Type) }

// addonsConfig is cluster c's addons configuration with infra inf.
func (d *Daemon) addonsConfig(c *api.Cluster, inf *api.Infra) (addons.Config, error) {
	ip, err := netip.ParseAddr(inf.Endpoint.Host)
	if err != nil {
		return addons.Config{}, fmt.Errorf("the cluster's endpoint host %q is not an IP address, so the kubernetes Service cannot point at it", inf.Endpoint.Host)
	}
	dns, err := c.Spec.Networking.ServiceIP(api.DNSServiceIndex)
	if err != nil {
		return addons.Config{}, fmt.Errorf("spec.networking.serviceCIDR: %w", err)
	}
	pods, err := netip.ParsePrefix(c.Spec.Networking.PodCIDR)
	if err != nil {
		return addons.Config{}, fmt.Errorf("spec.networking.podCIDR %q: %w", c.Spec.Networking.PodCIDR, err)
	}
	cfg := addons.Config{APIServer: netip.AddrPortFrom(ip, uint16(inf.Endpoint.Port)), DNSIP: dns,
		DNSImage: d.cfg.DNSImage, ClusterDomain: api.ClusterDomain, PodCIDR: pods, NetImage: d.cfg.NetImage}
	return cfg, cfg.Validate()
}

// ensureAddons applies cluster c's guest addons once its kube-apiserver is ready, again when
// their configuration changes and every addonsRefresh. It returns how soon to look again (0:
// nothing to wait for); a failure is logged and counted, never an error of the reconcile (the
// control plane itself is up).
func (d *Daemon) ensureAddons(ctx context.Context, log *slog.Logger, c *api.Cluster, inf *api.Infra) time.Duration {
	if !wantsAddons(c) || c.DeletionTimestamp != nil {
		return 0
	}
	d.addonState.mu.Lock()
	last := d.addonState.applied[c.Name]
	d.addonState.mu.Unlock()
	cfg, err := d.addonsConfig(c, inf)
	if err != nil {
		if last.retryFor != addonsInvalid || time.Now().After(last.retryAt) { // said once an addonsRefresh, not every reconcile
			log.Warn("the cluster gets no guest addons (pod network, DNS, the kubernetes Service's endpoints)", "err", err)
			d.metrics.addons.WithLabelValues(addonsInvalid).Inc()
			d.addonState.mu.Lock()
			d.addonState.applied[c.Name] = addonApplied{retryAt: time.Now().Add(addonsRefresh), retryFor: addonsInvalid}
			d.addonState.mu.Unlock()
		}
		return 0
	}
	hash := cfg.Hash()
	if last.hash == hash && time.Since(last.at) < addonsRefresh {
		return 0
	}
	if wait := time.Until(last.retryAt); wait > 0 && last.retryFor == hash {
		return wait
	}
	// Only now the component records (a read of the bucket): a cluster whose addons are
	// current costs its reconciles nothing here.
	recs, err := d.records(ctx, c.Name)
	if err != nil {
		return d.cfg.ProgressInterval
	}
	if r := recs[api.ComponentKubeAPIServer]; r == nil || r.Value.Status.ReadyReplicas == 0 {
		return d.cfg.ProgressInterval
	}
	cl, err := d.guests.For(ctx, c.Name)
	if err != nil {
		log.Debug("no guest client for the addons yet", "err", err)
		return d.cfg.ProgressInterval
	}
	actx, cancel := context.WithTimeout(ctx, addonsTimeout)
	defer cancel()
	start := time.Now()
	if err := addons.Apply(actx, cl.Clientset, cfg); err != nil {
		log.Warn("cannot apply the guest addons yet; retrying", "retry_in", addonsRetry, "err", err)
		d.metrics.addons.WithLabelValues(addonsFailed).Inc()
		d.addonState.mu.Lock()
		last.retryAt, last.retryFor = time.Now().Add(addonsRetry), hash
		d.addonState.applied[c.Name] = last
		d.addonState.mu.Unlock()
		return addonsRetry
	}
	d.metrics.addons.WithLabelValues(addonsApplied).Inc()
	d.metrics.addonsDuration.Observe(time.Since(start).Seconds())
	d.addonState.mu.Lock()
	d.addonState.applied[c.Name] = addonApplied{hash: hash, at: time.Now()}
	d.addonState.mu.Unlock()
	if last.hash != hash {
		log.Info("applied the guest addons", "dns", cfg.DNSIP, "dns_image", cfg.DNSImage, "netd_image", cfg.NetImage, "kubernetes_endpoint", cfg.APIServer, "hash", hash)
	}
	return 0
}

// forgetAddons drops what is remembered of cluster's addons (after its deletion).
func (d *Daemon) forgetAddons(cluster string) {
	d.addonState.mu.Lock()
	delete(d.addonState.applied, cluster)
	d.addonState.mu.Unlock()
	d.guests.Forget(cluster)
}

// newGuests is the guest clients the addons are applied with.
func (d *Daemon) newGuests() *guest.Clients {
	return guest.NewClients(d.pki, d.seal, guest.WithInfra(d.infra))
}
