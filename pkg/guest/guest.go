// Package guest hands out clients of guest clusters: the admin kubeconfig pkid sealed into a
// cluster's PKI record (bucket "pki"), opened with the seal key and cached until the record's
// serial changes (a rotation renews the admin certificate).
//
// With the infra records (WithInfra), the daemons never go through the endpoint of a cluster
// behind infrad's load balancer: a single kube-apiserver is reached at its own port, several
// (HighlyAvailable) at the balancer's internal listener (infra.internalEndpoint). Their own
// traffic must not wake a hibernated cluster nor count as its activity (the endpoint wakes
// it on a connection, docs/hibernation.md), and fails fast while it sleeps.
package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	server     string // the apiserver it goes to directly, or "" (the kubeconfig's)
}

// Clients caches a Client per cluster. It is safe for concurrent use.
type Clients struct {
	pki   *store.Store[api.ClusterPKI]
	infra *store.Store[api.Infra] // nil: the kubeconfig's own server
	key   *certs.SealKey

	mu    sync.Mutex
	cache map[string]*Client
}

// Option configures Clients.
type Option func(*Clients)

// WithInfra has the clients read the infra records, to reach a single kube-apiserver
// directly, or several through the load balancer's internal listener, rather than through
// the endpoint.
func WithInfra(infra *store.Store[api.Infra]) Option {
	return func(c *Clients) { c.infra = infra }
}

// NewClients reads PKI records from pki and opens their kubeconfigs with key.
func NewClients(pki *store.Store[api.ClusterPKI], key *certs.SealKey, opts ...Option) *Clients {
	c := &Clients{pki: pki, key: key, cache: map[string]*Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// internalServer returns the URL of the cluster's single kube-apiserver when it is behind a
// load balancer, or of the balancer's internal listener in front of several, else "" (the
// kubeconfig's server stands: no infra record, or an HA one from before the internal
// listener, which infrad's next reconcile gives one).
func (c *Clients) internalServer(ctx context.Context, cluster string) (string, error) {
	if c.infra == nil {
		return "", nil
	}
	inf, _, err := c.infra.Get(ctx, cluster)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return serverOf(inf), nil
}

// serverOf is internalServer's choice for the record inf.
func serverOf(inf *api.Infra) string {
	if e := inf.InternalEndpoint; len(inf.APIServers) > 1 && e != nil && e.Port != 0 {
		return "https://" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	}
	if len(inf.APIServers) != 1 || inf.APIServers[0] == inf.Endpoint || inf.APIServers[0].Port == 0 {
		return ""
	}
	return "https://" + net.JoinHostPort(inf.APIServers[0].Host, strconv.Itoa(inf.APIServers[0].Port))
}

// withServer returns kubeconfig with every cluster's server set to server.
func withServer(kubeconfig []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, cl := range cfg.Clusters {
		cl.Server = server
	}
	return clientcmd.Write(*cfg)
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
	server, err := c.internalServer(ctx, cluster)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cached := c.cache[cluster]
	c.mu.Unlock()
	if cached != nil && cached.Serial == p.Serial && cached.server == server {
		return cached, nil
	}
	kc, err := c.key.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("open the admin kubeconfig of %s (is the seal key the one pkid uses?): %w", cluster, err)
	}
	if server != "" {
		if kc, err = withServer(kc, server); err != nil {
			return nil, fmt.Errorf("admin kubeconfig of %s: %w", cluster, err)
		}
	}
	cfg, err := kube.RESTConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of %s: %w", cluster, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl := &Client{Cluster: cluster, Serial: p.Serial, Kubeconfig: kc, RESTConfig: cfg, Clientset: cs, server: server}
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
