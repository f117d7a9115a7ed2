package ignitiond

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/store"
)

// payloadKey identifies a rendered payload: a pool's config hash at one pool generation
// (labels and taints change the generation, not the hash), for one token (a real node's
// payload fetches its kubelet with it).
type payloadKey struct {
	cluster, nodepool, hash, token string
	generation                     int64
}

// payloadCache holds rendered payloads. Entries of a pool go when its record changes to
// another generation or stops holding their hash, and when it is deleted.
type payloadCache struct {
	mu      sync.Mutex
	entries map[payloadKey][]byte
}

func newPayloadCache() *payloadCache { return &payloadCache{entries: map[payloadKey][]byte{}} }

func (c *payloadCache) get(k payloadKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.entries[k]
	return b, ok
}

func (c *payloadCache) put(k payloadKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[k] = b
}

// keep drops the entries of record key that rec (nil: deleted) no longer serves.
func (c *payloadCache) keep(key string, rec *api.IgnitionTokens) {
	cluster, np, _ := api.SplitPartKey(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.cluster != cluster || k.nodepool != np {
			continue
		}
		if rec == nil || k.generation != rec.NodePoolGeneration ||
			(k.token != rec.Current.Token && (rec.Previous == nil || k.token != rec.Previous.Token)) {
			delete(c.entries, k)
		}
	}
}

// dropCluster forgets every entry of cluster.
func (c *payloadCache) dropCluster(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.cluster == cluster {
			delete(c.entries, k)
		}
	}
}

// payload returns the rendered payload of ref's token, from the cache or built anew.
func (d *Daemon) payload(ctx context.Context, ref tokenRef) ([]byte, error) {
	k := payloadKey{cluster: ref.cluster, nodepool: ref.nodepool, hash: ref.token.ConfigHash, token: ref.token.Token, generation: ref.generation}
	if b, ok := d.cache.get(k); ok {
		d.metrics.cache.WithLabelValues("hit").Inc()
		return b, nil
	}
	d.metrics.cache.WithLabelValues("miss").Inc()
	b, err := d.render(ctx, ref)
	if err != nil {
		return nil, err
	}
	d.cache.put(k, b)
	return b, nil
}

// render builds the payload of ref's token: the token's own hash, release and config
// documents, with the pool's current labels and taints.
func (d *Daemon) render(ctx context.Context, ref tokenRef) ([]byte, error) {
	pool, _, err := d.nodepools.Get(ctx, ref.key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrPoolGone
	}
	if err != nil {
		return nil, err
	}
	p, _, err := d.pki.Get(ctx, ref.cluster)
	if err != nil {
		return nil, fmt.Errorf("pki of %s: %w", ref.cluster, err)
	}
	ca, ok := p.Certs[api.CertRootCA]
	if !ok || len(ca.CertPEM) == 0 {
		return nil, ErrNoRootCA
	}
	secret, err := d.bootstrapSecret(ref.cluster, p, ref.nodepool, ref.bootstrapID)
	if err != nil {
		return nil, err
	}
	kc, err := kube.Kubeconfig(kube.KubeconfigSpec{
		Server:      p.KubeconfigServer,
		CAPEM:       ca.CertPEM,
		Token:       ref.bootstrapID + "." + secret,
		ClusterName: ref.cluster,
		UserName:    "kubelet-bootstrap",
	})
	if err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig of %s: %w", ref.key, err)
	}
	labels := maps.Clone(pool.Spec.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[api.LabelNodePool] = ref.nodepool
	taints := pool.Spec.Taints
	if taints == nil {
		taints = []api.Taint{}
	}
	payload := ignition.Payload{
		BootstrapKubeconfig: kc,
		CACertPEM:           ca.CertPEM,
		Kubelet: ignition.KubeletConfig{
			NodeLabels:     labels,
			Taints:         taints,
			ConfigHash:     ref.token.ConfigHash,
			KubeletVersion: "v" + strings.TrimPrefix(ref.token.Release, "v"),
		},
		Documents: ref.token.Config,
	}
	if api.RealNodes(pool.Spec.Platform.Type) {
		if payload.Node, err = d.realNode(ctx, ref, pool, ca.CertPEM); err != nil {
			return nil, err
		}
	}
	return payload.Render()
}

// realNode is what a payload needs to boot a real node of ref's pool (platform none; the
// local platform's machines are simulated and read only the KubeletConfig): the node binaries
// of the token's release from this cluster's listener, and the cluster's pod network.
func (d *Daemon) realNode(ctx context.Context, ref tokenRef, pool *api.NodePool, rootCA []byte) (*ignition.Node, error) {
	srv, _, err := d.servers.Get(ctx, ref.cluster)
	if err != nil {
		return nil, fmt.Errorf("ignition server of %s: %w", ref.cluster, err)
	}
	c, _, err := d.clusters.Get(ctx, ref.cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", ref.cluster, err)
	}
	bins := map[string]*ignition.Binary{}
	for _, name := range release.NodeBinaries() {
		_, sum, err := d.binaries.find(ref.token.Release, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoNodeBinary, err)
		}
		bins[name] = &ignition.Binary{URL: nodeBinaryURL(srv.Endpoint, ref.token.Release, name), SHA512: sum}
	}
	// The cluster's DNS Service (componentd's CoreDNS addon for clusters of real nodes); a
	// service CIDR too small for it leaves the kubelet without one (pods get the node's
	// resolver).
	var dns []string
	if ip, err := c.Spec.Networking.ServiceIP(api.DNSServiceIndex); err == nil {
		dns = []string{ip.String()}
	}
	var providerIDPrefix string
	if api.ProvidesMachines(pool.Spec.Platform.Type) {
		providerIDPrefix = api.ProviderID(ref.cluster, "")
	}
	return &ignition.Node{
		ProviderIDPrefix: providerIDPrefix,
		ClusterDomain:    api.ClusterDomain,
		ClusterDNS:       dns,
		Kubelet:          *bins[release.Kubelet],
		KubeProxy:        *bins[release.KubeProxy],
		Token:            ref.token.Token,
		ServerCAPEM:      rootCA,
		PodCIDR:          podCIDR(c),
		SandboxImage:     d.cfg.SandboxImage,
		Registry:         d.cfg.Registry,
	}, nil
}

// podCIDR is the range a node's bridge hands pod addresses from: the cluster's pod network.
func podCIDR(c *api.Cluster) string {
	if c.Spec.Networking.PodCIDR != "" {
		return c.Spec.Networking.PodCIDR
	}
	return api.DefaultPodCIDR
}

// Guest bootstrap tokens: "<id>.<secret>", both [a-z0-9], 6 and 16 characters.
const (
	bootstrapIDLen     = 6
	bootstrapSecretLen = 16
	bootstrapAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// newBootstrapID returns a random bootstrap token id.
func newBootstrapID() string { return randomString(bootstrapIDLen) }

// randomString returns n random characters of bootstrapAlphabet.
func randomString(n int) string {
	b := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(b) < n {
		_, _ = rand.Read(buf)
		b = appendUnbiased(b, buf, n)
	}
	return string(b)
}

// appendUnbiased appends characters of bootstrapAlphabet drawn from src (rejecting bytes that
// would bias the draw) to b, up to n characters.
func appendUnbiased(b, src []byte, n int) []byte {
	limit := byte(256 - 256%len(bootstrapAlphabet)) // 252: a multiple of 36
	for _, x := range src {
		if len(b) == n {
			break
		}
		if x < limit {
			b = append(b, bootstrapAlphabet[int(x)%len(bootstrapAlphabet)])
		}
	}
	return b
}

// bootstrapSecret is the secret of pool nodepool's bootstrap token id: derived from the
// cluster's root CA key (which only holders of the seal key can open, and which never
// changes), so it is the same after a restart and on every replica.
func (d *Daemon) bootstrapSecret(cluster string, p *api.ClusterPKI, nodepool, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%s/%s: no bootstrap token id", cluster, nodepool)
	}
	key, err := d.bootstrapKey(cluster, p)
	if err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		src, err := hkdf.Key(sha256.New, key, []byte(cluster), fmt.Sprintf("hostplane ignitiond bootstrap token %s %s %d", nodepool, id, i), 64)
		if err != nil {
			return "", err
		}
		if s := appendUnbiased(nil, src, bootstrapSecretLen); len(s) == bootstrapSecretLen {
			return string(s), nil
		}
	}
}

// bootstrapKey is cluster's derivation key: its opened root CA key (from p), cached.
func (d *Daemon) bootstrapKey(cluster string, p *api.ClusterPKI) ([]byte, error) {
	d.mu.Lock()
	key := d.bootstrap[cluster]
	d.mu.Unlock()
	if key != nil {
		return key, nil
	}
	ca, ok := p.Certs[api.CertRootCA]
	if !ok || len(ca.SealedKey) == 0 {
		return nil, ErrNoRootCA
	}
	key, err := d.seal.Open(ca.SealedKey)
	if err != nil {
		return nil, fmt.Errorf("open the root CA key of %s (is the seal key the one pkid uses?): %w", cluster, err)
	}
	d.mu.Lock()
	d.bootstrap[cluster] = key
	d.mu.Unlock()
	return key, nil
}
