package localcloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	ignv3 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostplane/hostplane/services/localcloud/ignitionfs"
)

// The files a machine's kubelet reads from its disk once Ignition wrote it
// (docs/nodepool-flow.md, step 5).
const (
	PathBootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubeconfig"
	PathKubeletConfig       = "/etc/kubernetes/kubelet.json"
	PathKubeletCA           = "/etc/kubernetes/pki/ca.crt"
)

// KubeletConfig is /etc/kubernetes/kubelet.json, the machine's kubelet settings.
type KubeletConfig struct {
	NodeLabels     map[string]string `json:"nodeLabels,omitempty"`
	Taints         []corev1.Taint    `json:"taints,omitempty"`
	ConfigHash     string            `json:"configHash"`
	KubeletVersion string            `json:"kubeletVersion"` // "v1.34.4"
}

// nodeConfig is what the kubelet reads from the machine's disk.
type nodeConfig struct {
	Bootstrap []byte // the bootstrap kubeconfig
	CA        []byte // the cluster's CA bundle (PEM), trusted for the apiserver
	Kubelet   KubeletConfig
}

// ignitionAttempt bounds one fetch of a config.
const ignitionAttempt = 30 * time.Second

// parseConfig parses and validates an Ignition config of spec 3.0 to 3.5 into the 3.5 types.
func parseConfig(raw []byte) (igntypes.Config, error) {
	cfg, rpt, err := ignv3.ParseCompatibleVersion(raw)
	if err != nil {
		if r := strings.TrimSpace(rpt.String()); r != "" {
			return igntypes.Config{}, fmt.Errorf("%w: %v: %s", ErrInvalidConfig, err, r)
		}
		return igntypes.Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return cfg, nil
}

// fetchHooks let the machine follow and cut short a fetch: retry hears of every failed
// attempt (a non-nil answer aborts the fetch with it), wake (may be nil) ends the wait
// before the next one.
type fetchHooks struct {
	retry func(err error) error
	wake  <-chan struct{}
}

// ignition parses a machine's userdata (an Ignition stub) and resolves it the way Ignition
// does: the config of config.replace replaces it, those of config.merge are fetched and merged
// into it in order, each fetched over HTTPS trusting only security.tls.certificateAuthorities.
func (p *guestPool) ignition(ctx context.Context, userData []byte, hooks fetchHooks) (igntypes.Config, error) {
	cfg, err := parseConfig(userData)
	if err != nil {
		return igntypes.Config{}, fmt.Errorf("userdata: %w", err)
	}
	return p.resolve(ctx, cfg, 0, hooks)
}

func (p *guestPool) resolve(ctx context.Context, cfg igntypes.Config, depth int, hooks fetchHooks) (igntypes.Config, error) {
	refs := cfg.Ignition.Config
	if refs.Replace.Source == nil && len(refs.Merge) == 0 {
		return cfg, nil
	}
	if depth > 0 {
		// The userdata's references lead to the pool's payload on ignitiond; a reference
		// inside a fetched config comes from a pool's config document, and this machine is a
		// routine of a management process, which never fetches what a user names (a real
		// machine, platform docker or none, fetches it itself).
		src := "config.replace"
		if len(refs.Merge) > 0 && refs.Merge[0].Source != nil {
			src = ignitionfs.Redact(*refs.Merge[0].Source)
		} else if refs.Replace.Source != nil {
			src = ignitionfs.Redact(*refs.Replace.Source)
		}
		return igntypes.Config{}, fmt.Errorf("%w: the fetched config references %s: a simulated machine fetches only its userdata's config (a real machine fetches a config document's references itself)", ErrInvalidConfig, src)
	}
	client, err := p.ignitionClient(cfg.Ignition.Security.TLS)
	if err != nil {
		return igntypes.Config{}, err
	}
	child := func(ref igntypes.Resource) (igntypes.Config, error) {
		raw, err := fetchResource(ctx, client, ref, p.backoff, hooks)
		if err != nil {
			return igntypes.Config{}, err
		}
		c, err := parseConfig(raw)
		if err != nil {
			return igntypes.Config{}, fmt.Errorf("config from %s: %w", ignitionfs.Redact(*ref.Source), err)
		}
		return p.resolve(ctx, c, depth+1, hooks)
	}
	if refs.Replace.Source != nil {
		return child(refs.Replace)
	}
	for _, ref := range refs.Merge {
		c, err := child(ref)
		if err != nil {
			return igntypes.Config{}, err
		}
		cfg = ignv3.Merge(cfg, c)
	}
	return cfg, nil
}

// ignitionClient returns an HTTP client that trusts only the given CAs (data: URLs); clients
// are shared by every machine trusting the same CAs.
func (p *guestPool) ignitionClient(t igntypes.TLS) (*http.Client, error) {
	if len(t.CertificateAuthorities) == 0 {
		return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities is empty: nothing to trust the Ignition server with", ErrInvalidConfig)
	}
	var bundle []byte
	for i, ca := range t.CertificateAuthorities {
		if ca.Source == nil {
			return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities.%d has no source", ErrInvalidConfig, i)
		}
		data, err := ignitionfs.DecodeDataURL(*ca.Source)
		if err != nil {
			return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities.%d: %v", ErrInvalidConfig, i, err)
		}
		if data, err = ignitionfs.Decompress(data, ca.Compression); err != nil {
			return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities.%d: %v", ErrInvalidConfig, i, err)
		}
		bundle = append(append(bundle, data...), '\n')
	}
	sum := sha256.Sum256(bundle)
	k := hex.EncodeToString(sum[:])

	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.ignitionClients[k]; ok {
		return c, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities holds no PEM certificate", ErrInvalidConfig)
	}
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	c := &http.Client{Transport: tr, Timeout: ignitionAttempt}
	p.ignitionClients[k] = c
	return c, nil
}

// fetchResource fetches a config reference, retrying with backoff until it answers, the
// context ends or retry aborts; it checks verification.hash and decompresses.
func fetchResource(ctx context.Context, client *http.Client, ref igntypes.Resource, backoff func(int) time.Duration, hooks fetchHooks) ([]byte, error) {
	if ref.Source == nil {
		return nil, fmt.Errorf("%w: a config reference has no source", ErrInvalidConfig)
	}
	src := *ref.Source
	u, err := url.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%w: config source: %v", ErrInvalidConfig, err)
	}
	var data []byte
	switch u.Scheme {
	case "data":
		if data, err = ignitionfs.DecodeDataURL(src); err != nil {
			return nil, fmt.Errorf("%w: config source: %v", ErrInvalidConfig, err)
		}
	case "https", "http":
		for attempt := 1; ; attempt++ {
			data, err = fetchOnce(ctx, client, src, ref.HTTPHeaders)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if rerr := hooks.retry(err); rerr != nil {
				return nil, rerr
			}
			t := time.NewTimer(backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-hooks.wake:
				t.Stop()
				if rerr := hooks.retry(err); rerr != nil {
					return nil, rerr
				}
			case <-t.C:
			}
		}
	default:
		return nil, fmt.Errorf("%w: config source scheme %q is not supported (https or data)", ErrInvalidConfig, u.Scheme)
	}
	if err := ignitionfs.Verify(data, ref.Verification); err != nil {
		return nil, fmt.Errorf("config from %s: %w", ignitionfs.Redact(src), err)
	}
	return ignitionfs.Decompress(data, ref.Compression)
}

// fetchOnce GETs src as Ignition does.
func fetchOnce(ctx context.Context, client *http.Client, src string, headers igntypes.HTTPHeaders) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1")
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("User-Agent", "Ignition/2.24.0 (hostplane localcloud)")
	for _, h := range headers {
		if h.Value != nil {
			req.Header.Set(h.Name, *h.Value)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", ignitionfs.Redact(src), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", ignitionfs.Redact(src), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", ignitionfs.Redact(src), resp.Status)
	}
	return body, nil
}

// readNodeConfig reads what the kubelet needs from the machine's disk.
func readNodeConfig(root string) (*nodeConfig, error) {
	read := func(p string) ([]byte, error) {
		b, err := ignitionfs.ReadFile(root, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: the config wrote no %s", ErrInvalidConfig, p)
		}
		return b, err
	}
	var nc nodeConfig
	var err error
	if nc.Bootstrap, err = read(PathBootstrapKubeconfig); err != nil {
		return nil, err
	}
	if _, err := clientcmd.Load(nc.Bootstrap); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, PathBootstrapKubeconfig, err)
	}
	if nc.CA, err = read(PathKubeletCA); err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(nc.CA) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalidConfig, PathKubeletCA)
	}
	raw, err := read(PathKubeletConfig)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc.Kubelet); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, PathKubeletConfig, err)
	}
	if nc.Kubelet.KubeletVersion == "" {
		return nil, fmt.Errorf("%w: %s: kubeletVersion is required", ErrInvalidConfig, PathKubeletConfig)
	}
	return &nc, nil
}

// guestPool holds what machines share to talk to guests: one HTTP client per set of
// trusted Ignition CAs.
type guestPool struct {
	backoff func(attempt int) time.Duration // between fetch attempts

	mu              sync.Mutex
	ignitionClients map[string]*http.Client
}

func newGuestPool() *guestPool {
	return &guestPool{backoff: backoff, ignitionClients: map[string]*http.Client{}}
}

// close drops idle connections.
func (p *guestPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.ignitionClients {
		c.CloseIdleConnections()
	}
}
