// Package guest hands out clients of guest clusters: the admin kubeconfig pkid sealed into a
// cluster's PKI record (bucket "pki"), opened with the seal key and cached until the record's
// serial changes (a rotation renews the admin certificate).
package guest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/store"
)

// ErrNotReady reports a cluster whose admin kubeconfig pkid has not issued yet.
var ErrNotReady = errors.New("the guest cluster's admin kubeconfig is not ready")

// Client is one guest cluster's admin access.
type Client struct {
	Cluster    string
	Serial     string // the PKI serial the kubeconfig comes from
	Kubeconfig []byte // admin kubeconfig (YAML), secret
	RESTConfig *rest.Config
	Clientset  *kubernetes.Clientset
}

// Clients caches a Client per cluster. It is safe for concurrent use.
type Clients struct {
	pki *store.Store[api.ClusterPKI]
	key *certs.SealKey

	mu    sync.Mutex
	cache map[string]*Client
}

// NewClients reads PKI records from pki and opens their kubeconfigs with key.
func NewClients(pki *store.Store[api.ClusterPKI], key *certs.SealKey) *Clients {
	return &Clients{pki: pki, key: key, cache: map[string]*Client{}}
}

// For returns the admin client of cluster, built anew when the PKI serial changed. It wraps
// ErrNotReady while pkid has not issued the kubeconfig.
func (c *Clients) For(ctx context.Context, cluster string) (*Client, error) {
	p, _, err := c.pki.Get(ctx, cluster)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: cluster %s has no PKI record", ErrNotReady, cluster)
	}
	if err != nil {
		return nil, err
	}
	sealed := p.Kubeconfigs[api.KubeconfigAdmin]
	if !p.Ready || len(sealed) == 0 {
		return nil, fmt.Errorf("%w: cluster %s", ErrNotReady, cluster)
	}
	c.mu.Lock()
	cached := c.cache[cluster]
	c.mu.Unlock()
	if cached != nil && cached.Serial == p.Serial {
		return cached, nil
	}
	kc, err := c.key.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open the admin kubeconfig of %s (is the seal key the one pkid uses?): %w", cluster, err)
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of %s: %w", cluster, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl := &Client{Cluster: cluster, Serial: p.Serial, Kubeconfig: kc, RESTConfig: cfg, Clientset: cs}
	c.mu.Lock()
	c.cache[cluster] = cl
	c.mu.Unlock()
	return cl, nil
}

// Forget drops the cached client of cluster (after its deletion).
func (c *Clients) Forget(cluster string) {
	c.mu.Lock()
	delete(c.cache, cluster)
	c.mu.Unlock()
}
