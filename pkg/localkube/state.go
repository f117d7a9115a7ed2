package localkube

import (
	"cmp"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/portrange"
)

// ports are the ports a cluster uses, persisted in <Dir>/ports.json.
type ports struct {
	APIServer  int `json:"apiServer"`
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
}

const portsFile = "ports.json"

// resolvePorts takes each port from cfg, else from the ports persisted in dir, else picks a
// free one; and persists the result.
func resolvePorts(cfg Config) (ports, error) {
	path := filepath.Join(cfg.Dir, portsFile)
	var saved ports
	switch b, err := os.ReadFile(path); {
	case err == nil:
		if err := json.Unmarshal(b, &saved); err != nil {
			return ports{}, fmt.Errorf("read %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return ports{}, err
	}
	p := ports{
		APIServer:  cmp.Or(cfg.APIServerPort, saved.APIServer),
		EtcdClient: cmp.Or(cfg.EtcdClientPort, saved.EtcdClient),
		EtcdPeer:   cmp.Or(cfg.EtcdPeerPort, saved.EtcdPeer),
	}
	// Outside the kernel's ephemeral range: the ports are kept across restarts, and while the
	// cluster is stopped any outgoing connection could take one from that range.
	lo, hi := portrange.Range()
	picked := map[int]bool{p.APIServer: true, p.EtcdClient: true, p.EtcdPeer: true}
	pick := func(port *int, host string) error {
		if *port != 0 {
			return nil
		}
		got, err := portrange.Pick(host, lo, hi, func(p int) bool { return picked[p] })
		if err != nil {
			return fmt.Errorf("pick a free port on %s: %w", host, err)
		}
		*port, picked[got] = got, true
		return nil
	}
	if err := errors.Join(pick(&p.APIServer, cfg.Host), pick(&p.EtcdClient, etcdHost), pick(&p.EtcdPeer, etcdHost)); err != nil {
		return ports{}, err
	}
	if p != saved {
		b, _ := json.MarshalIndent(p, "", "  ")
		if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
			return ports{}, err
		}
	}
	return p, nil
}

// pki is the cluster's PKI, as files under <Dir>/pki.
type pki struct {
	dir                  string
	ca, apiserver, admin *certs.KeyPair
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a kept leaf certificate is reissued.
	renewBefore = 30 * 24 * time.Hour

	adminUser  = "hostplane-admin"
	adminGroup = "system:masters"
	// serviceIP is the first address of serviceCIDR: the in-cluster "kubernetes" Service.
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// ensurePKI loads the PKI under dir, creating what is missing and reissuing a leaf that no
// longer fits (expiring, another CA, or missing a required name).
func ensurePKI(dir, host string) (pki, error) {
	p := pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, err
	}
	var err error
	if p.ca, err = loadKeyPair(p.path("ca.crt"), p.path("ca.key")); err != nil {
		return p, err
	}
	if p.ca == nil {
		if p.ca, err = certs.NewCA("hostplane-localkube-ca", caLifetime); err != nil {
			return p, err
		}
		if err := saveKeyPair(p.ca, p.path("ca.crt"), p.path("ca.key")); err != nil {
			return p, err
		}
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(serviceIP)}
	if h := net.ParseIP(host); !slices.ContainsFunc(ips, h.Equal) {
		ips = append(ips, h)
	}
	serving := certs.Request{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        ips,
		Usage:      certs.UsageServer,
		Lifetime:   leafLifetime,
	}
	if p.apiserver, err = p.ensureLeaf("apiserver", serving); err != nil {
		return p, err
	}
	admin := certs.Request{
		CommonName:    adminUser,
		Organizations: []string{adminGroup},
		Usage:         certs.UsageClient,
		Lifetime:      leafLifetime,
	}
	if p.admin, err = p.ensureLeaf("admin", admin); err != nil {
		return p, err
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return p, err
	}
	return p, nil
}

func (p pki) ensureLeaf(name string, req certs.Request) (*certs.KeyPair, error) {
	certPath, keyPath := p.path(name+".crt"), p.path(name+".key")
	// An unreadable or mismatched leaf is simply reissued; only the CA is precious.
	kp, err := loadKeyPair(certPath, keyPath)
	if err == nil && kp != nil && fits(kp.Cert, p.ca.Cert, req) {
		return kp, nil
	}
	if kp, err = p.ca.Issue(req); err != nil {
		return nil, err
	}
	if err := saveKeyPair(kp, certPath, keyPath); err != nil {
		return nil, err
	}
	return kp, nil
}

// fits reports whether cert, issued by ca, still serves req.
func fits(cert, ca *x509.Certificate, req certs.Request) bool {
	if cert.CheckSignatureFrom(ca) != nil || time.Until(cert.NotAfter) < renewBefore ||
		cert.Subject.CommonName != req.CommonName || !slices.Equal(cert.Subject.Organization, req.Organizations) {
		return false
	}
	for _, d := range req.DNSNames {
		if !slices.Contains(cert.DNSNames, d) {
			return false
		}
	}
	for _, ip := range req.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func (p pki) ensureServiceAccountKey() error {
	privPath, pubPath := p.path("sa.key"), p.path("sa.pub")
	var key *certs.SigningKey
	switch b, err := os.ReadFile(privPath); {
	case err == nil:
		if key, err = certs.ParseSigningKey(b); err != nil {
			return fmt.Errorf("%s: %w", privPath, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if key, err = certs.NewSigningKey(); err != nil {
			return err
		}
		priv, err := key.PrivatePEM()
		if err != nil {
			return err
		}
		if err := atomicfile.Write(privPath, priv, 0o600); err != nil {
			return err
		}
	default:
		return err
	}
	if _, err := os.Stat(pubPath); err == nil {
		return nil
	}
	pub, err := key.PublicPEM()
	if err != nil {
		return err
	}
	return atomicfile.Write(pubPath, pub, 0o644)
}

// loadKeyPair returns nil, nil when either file is missing.
func loadKeyPair(certPath, keyPath string) (*certs.KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	kp, err := certs.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	return kp, nil
}

func saveKeyPair(kp *certs.KeyPair, certPath, keyPath string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	// The key first: a certificate without its key is reissued on the next start.
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certPath, kp.CertPEM(), 0o644)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
