package localcloud

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ignv3 "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
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

// maxConfigDepth bounds nested merge/replace references.
const maxConfigDepth = 4

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
	if depth >= maxConfigDepth {
		return igntypes.Config{}, fmt.Errorf("%w: config references nest deeper than %d", ErrInvalidConfig, maxConfigDepth)
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
			return igntypes.Config{}, fmt.Errorf("config from %s: %w", redact(*ref.Source), err)
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
		data, err := decodeDataURL(*ca.Source)
		if err != nil {
			return nil, fmt.Errorf("%w: ignition.security.tls.certificateAuthorities.%d: %v", ErrInvalidConfig, i, err)
		}
		if data, err = decompress(data, ca.Compression); err != nil {
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
		if data, err = decodeDataURL(src); err != nil {
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
	if err := verify(data, ref.Verification); err != nil {
		return nil, fmt.Errorf("config from %s: %w", redact(src), err)
	}
	return decompress(data, ref.Compression)
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
		return nil, fmt.Errorf("GET %s: %w", redact(src), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(src), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redact(src), resp.Status)
	}
	return body, nil
}

// verify checks data against a "sha512-<hex>" or "sha256-<hex>" hash, if there is one.
func verify(data []byte, v igntypes.Verification) error {
	fn, sum, err := v.HashParts()
	if err != nil || fn == "" {
		return err
	}
	var h hash.Hash
	switch fn {
	case "sha512":
		h = sha512.New()
	case "sha256":
		h = sha256.New()
	default:
		return fmt.Errorf("%w: hash function %q is not supported", ErrInvalidConfig, fn)
	}
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: %s is %s, want %s", ErrInvalidConfig, fn, got, sum)
	}
	return nil
}

func decodeDataURL(src string) ([]byte, error) {
	if !strings.HasPrefix(src, "data:") {
		return nil, fmt.Errorf("source %q is not a data URL", redact(src))
	}
	d, err := dataurl.DecodeString(src)
	if err != nil {
		return nil, fmt.Errorf("decode data URL: %w", err)
	}
	return d.Data, nil
}

func decompress(data []byte, compression *string) ([]byte, error) {
	if compression == nil || *compression == "" {
		return data, nil
	}
	if *compression != "gzip" {
		return nil, fmt.Errorf("compression %q is not supported", *compression)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(out) > maxFileSize {
		return nil, fmt.Errorf("gunzip: more than %d bytes", maxFileSize)
	}
	return out, nil
}

// redact shortens a source for messages: data URLs are elided, URLs lose their query.
func redact(src string) string {
	if strings.HasPrefix(src, "data:") {
		return "data:…"
	}
	if u, err := url.Parse(src); err == nil {
		u.RawQuery, u.User = "", nil
		return u.String()
	}
	return src
}

// applyConfig writes the config's storage (directories, files, links) under root, the
// machine's filesystem. A file that exists and is not marked overwrite fails the boot, as in
// Ignition; force (an in-place update) overwrites every file.
//
// Nothing a config says reaches the host outside root: every path is opened through an
// os.Root, which refuses to follow a link out of it, and a link's target is resolved in the
// machine's filesystem (".." stops at its "/", as it does on a machine) and written relative
// to the link, so it names a place under root whoever follows it.
func applyConfig(root string, cfg igntypes.Config, force bool) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range cfg.Storage.Directories {
		p, err := inRoot(d.Path)
		if err != nil {
			return err
		}
		if err := r.MkdirAll(p, modeOf(d.Mode, 0o755)); err != nil {
			return fmt.Errorf("directory %s: %w", d.Path, err)
		}
	}
	for _, f := range cfg.Storage.Files {
		if err := writeIgnitionFile(r, f, force); err != nil {
			return err
		}
	}
	for _, l := range cfg.Storage.Links {
		if err := writeIgnitionLink(r, l, force); err != nil {
			return err
		}
	}
	return nil
}

func writeIgnitionLink(r *os.Root, l igntypes.Link, force bool) error {
	p, err := inRoot(l.Path)
	if err != nil {
		return err
	}
	if l.Target == nil || (l.Hard != nil && *l.Hard) {
		return nil // hard links have nothing to say on a machine without an OS
	}
	target := *l.Target
	if !path.IsAbs(target) {
		target = path.Join("/", path.Dir(p), target)
	}
	rel, err := filepath.Rel(filepath.Join("/", filepath.Dir(p)), filepath.Clean(target))
	if err != nil {
		return fmt.Errorf("%w: link %s: target %q: %v", ErrInvalidConfig, l.Path, *l.Target, err)
	}
	if err := r.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("link %s: %w", l.Path, err)
	}
	if force || (l.Overwrite != nil && *l.Overwrite) {
		_ = r.Remove(p)
	}
	if err := r.Symlink(rel, p); err != nil {
		return fmt.Errorf("link %s: %w", l.Path, err)
	}
	return nil
}

// maxFileSize bounds a file's contents once decoded and decompressed.
const maxFileSize = 64 << 20

func writeIgnitionFile(r *os.Root, f igntypes.File, force bool) error {
	p, err := inRoot(f.Path)
	if err != nil {
		return err
	}
	var data []byte
	if f.Contents.Source != nil {
		raw, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			return fmt.Errorf("file %s: contents: %w", f.Path, err)
		}
		if data, err = decompress(raw, f.Contents.Compression); err != nil {
			return fmt.Errorf("file %s: contents: %w", f.Path, err)
		}
		if err := verify(raw, f.Contents.Verification); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	existing, rerr := r.ReadFile(p)
	exists := rerr == nil
	overwrite := force || (f.Overwrite != nil && *f.Overwrite)
	switch {
	case exists && !overwrite && f.Contents.Source != nil:
		return fmt.Errorf("file %s exists and overwrite is false", f.Path)
	case exists && f.Contents.Source == nil:
		data = existing // only appends and the mode change it
	}
	for i, a := range f.Append {
		if a.Source == nil {
			continue
		}
		raw, err := decodeDataURL(*a.Source)
		if err != nil {
			return fmt.Errorf("file %s: append.%d: %w", f.Path, i, err)
		}
		more, err := decompress(raw, a.Compression)
		if err != nil {
			return fmt.Errorf("file %s: append.%d: %w", f.Path, i, err)
		}
		data = append(data, more...)
	}
	if len(data) > maxFileSize {
		return fmt.Errorf("%w: file %s: %d bytes, more than the %d a file may hold", ErrInvalidConfig, f.Path, len(data), maxFileSize)
	}
	if err := r.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	if err := writeInRoot(r, p, data, modeOf(f.Mode, 0o644)); err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	return nil
}

// writeInRoot replaces p under r with data at once (a temporary file renamed over it): a
// crash leaves the old file or the new one, and a link at p is replaced, never followed.
func writeInRoot(r *os.Root, p string, data []byte, mode fs.FileMode) error {
	tmp := p + ".hostplane-tmp"
	_ = r.Remove(tmp)
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, mode) // whatever the umask
	}
	if err == nil {
		err = r.Rename(tmp, p)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

// inRoot maps an absolute path of the machine to its name under the machine's root
// ("." for "/"); ".." stops at "/", as it does on a machine.
func inRoot(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%w: path %q is not absolute", ErrInvalidConfig, p)
	}
	rel := strings.TrimPrefix(path.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return filepath.FromSlash(rel), nil
}

func modeOf(m *int, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & fs.ModePerm
}

// readNodeConfig reads what the kubelet needs from the machine's disk.
func readNodeConfig(root string) (*nodeConfig, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	read := func(p string) ([]byte, error) {
		name, _ := inRoot(p)
		b, err := r.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: the config wrote no %s", ErrInvalidConfig, p)
		}
		return b, err
	}
	var nc nodeConfig
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
