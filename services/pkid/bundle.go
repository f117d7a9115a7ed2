package pkid

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/kube"
)

// Reasons a leaf (or the kubeconfigs) is (re)issued.
const (
	reasonMissing   = "missing"   // not in the record (or does not parse)
	reasonIssuer    = "issuer"    // not signed by its CA
	reasonSubject   = "subject"   // CN or O differ from what pkid issues now
	reasonSANs      = "sans"      // does not cover the infra's hosts any more
	reasonRequested = "requested" // POST .../pki/rotate
	reasonLifetime  = "lifetime"  // outlives the cluster's (shortened) leaf lifetime
	reasonDue       = "due"       // RenewFraction of its lifetime has passed
	reasonServer    = "server"    // kubeconfigs point at an old endpoint
	reasonRenewed   = "renewed"   // kubeconfigs embed a renewed client certificate
	reasonType      = "type"      // the encryption keys are of another provider type
)

// lifetimeSlack tolerates NotAfter's second precision when comparing a leaf's expiry with
// the configured lifetime.
const lifetimeSlack = 5 * time.Second

// bundler issues, checks and renews one cluster's PKI. It holds no state between calls.
type bundler struct {
	seal     *certs.SealKey
	fraction float64 // RenewFraction
	// clock says when a leaf is due (daemon.Base.Clock; renew reads it). Certificates are
	// issued on the real clock, which TLS stacks check them against.
	clock clock.PassiveClock
}

// target is what a cluster's PKI must look like now.
type target struct {
	cluster string
	life    lifetimes
	leaves  []leafSpec
	server  string // kubeconfig server URL
	// encryption is the Secret encryption provider whose key pkid keeps
	// (api.SecretEncryptionAESCBC), "" for none.
	encryption string
}

// fresh issues a complete bundle: CAs, service-account key, leaves and kubeconfigs.
func (b *bundler) fresh(t target) (*api.ClusterPKI, error) {
	p := &api.ClusterPKI{
		ObjectMeta: api.ObjectMeta{Name: t.cluster},
		Certs:      map[string]api.CertBundle{},
	}
	cas := map[string]*certs.KeyPair{}
	for _, ca := range caSpecs(t.cluster) {
		kp, err := certs.NewCA(ca.CommonName, t.life.CA)
		if err != nil {
			return nil, err
		}
		if p.Certs[ca.Name], err = b.certBundle(kp); err != nil {
			return nil, err
		}
		cas[ca.Name] = kp
	}
	sa, err := certs.NewSigningKey()
	if err != nil {
		return nil, err
	}
	if p.ServiceAccount, err = b.keyBundle(sa); err != nil {
		return nil, err
	}
	renew := map[string]string{}
	for _, l := range t.leaves {
		renew[l.Name] = reasonMissing
	}
	pl := plan{leaves: renew, kubeconfigs: reasonMissing}
	if t.encryption != "" {
		pl.encryption = reasonMissing
	}
	if err := b.apply(p, cas, t, pl); err != nil {
		return nil, err
	}
	return p, nil
}

// openCAs opens every CA of p. A missing CA or service-account key is ErrIncomplete; a key
// that does not open (another seal key) is an error of its own, never a reason to reissue.
func (b *bundler) openCAs(p *api.ClusterPKI) (map[string]*certs.KeyPair, error) {
	if len(p.ServiceAccount.PublicPEM) == 0 || len(p.ServiceAccount.SealedPriv) == 0 {
		return nil, fmt.Errorf("%w: no service-account key", ErrIncomplete)
	}
	cas := map[string]*certs.KeyPair{}
	for _, ca := range caSpecs(p.Name) {
		cb, ok := p.Certs[ca.Name]
		if !ok || len(cb.CertPEM) == 0 || len(cb.SealedKey) == 0 {
			return nil, fmt.Errorf("%w: no %s", ErrIncomplete, ca.Name)
		}
		kp, err := b.keyPair(cb)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", ca.Name, err)
		}
		if !kp.Cert.IsCA {
			return nil, fmt.Errorf("%w: %s is not a CA", ErrIncomplete, ca.Name)
		}
		cas[ca.Name] = kp
	}
	return cas, nil
}

// plan is the work one reconcile does on an existing bundle.
type plan struct {
	leaves      map[string]string // leaf name → reason
	kubeconfigs string            // reason to re-render the kubeconfigs, "" for none
	encryption  string            // reason to generate a Secret encryption key, "" for none
}

func (pl plan) empty() bool {
	return len(pl.leaves) == 0 && pl.kubeconfigs == "" && pl.encryption == ""
}

// String lists the reasons, for logs: "apiserver=sans etcd-server=sans kubeconfigs=server".
func (pl plan) String() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(pl.leaves)) {
		parts = append(parts, n+"="+pl.leaves[n])
	}
	if pl.kubeconfigs != "" {
		parts = append(parts, "kubeconfigs="+pl.kubeconfigs)
	}
	if pl.encryption != "" {
		parts = append(parts, "secret-encryption-key="+pl.encryption)
	}
	return strings.Join(parts, " ")
}

// plan decides which leaves of p to renew and whether to re-render the kubeconfigs; now is
// the time on the daemon's clock, which says whether a leaf is due.
func (b *bundler) plan(p *api.ClusterPKI, cas map[string]*certs.KeyPair, t target, now time.Time) plan {
	pl := plan{leaves: map[string]string{}}
	for _, l := range t.leaves {
		if r := b.leafReason(p, cas[l.CA], l, t.life, now); r != "" {
			pl.leaves[l.Name] = r
		}
	}
	switch {
	case p.KubeconfigServer != t.server:
		pl.kubeconfigs = reasonServer
	case slices.ContainsFunc(kubeconfigSpecs, func(k kubeconfigSpec) bool { return len(p.Kubeconfigs[k.Name]) == 0 }):
		pl.kubeconfigs = reasonMissing
	case slices.ContainsFunc(kubeconfigSpecs, func(k kubeconfigSpec) bool { return pl.leaves[k.Cert] != "" }):
		pl.kubeconfigs = reasonRenewed
	}
	pl.encryption = encryptionReason(p.SecretEncryption, t.encryption)
	return pl
}

// encryptionReason says why a Secret encryption key of type want must be generated, or "" if
// keys holds one (or want is "": pkid keeps no key for that cluster).
func encryptionReason(keys *api.EncryptionKeys, want string) string {
	switch {
	case want == "":
		return ""
	case keys == nil || len(keys.Keys) == 0:
		return reasonMissing
	case keys.Type != want:
		return reasonType
	}
	return ""
}

// leafReason says why leaf l must be (re)issued, or "" if it is fine.
func (b *bundler) leafReason(p *api.ClusterPKI, ca *certs.KeyPair, l leafSpec, life lifetimes, now time.Time) string {
	cb, ok := p.Certs[l.Name]
	if !ok {
		return reasonMissing
	}
	cert, err := certs.ParseCertificate(cb.CertPEM)
	if err != nil || len(cb.SealedKey) == 0 {
		return reasonMissing
	}
	if cert.CheckSignatureFrom(ca.Cert) != nil {
		return reasonIssuer
	}
	if cert.Subject.CommonName != l.Req.CommonName || !slices.Equal(cert.Subject.Organization, l.Req.Organizations) {
		return reasonSubject
	}
	if !covers(cert, l.Req) {
		return reasonSANs
	}
	if p.RotationRequestedAt != nil {
		return reasonRequested
	}
	// A leaf issued now ends at the real clock's now plus the lifetime (certs.Issue), so this
	// compares with real time, not with now (the schedule's clock, which a test may hold).
	if cert.NotAfter.After(time.Now().Add(life.Leaf+lifetimeSlack)) && cert.NotAfter.Before(ca.Cert.NotAfter) {
		return reasonLifetime
	}
	if at, ok := renewAt(cert.NotBefore, cert.NotAfter, ca.Cert.NotAfter, life.Leaf, b.fraction); ok && !at.After(now) {
		return reasonDue
	}
	return ""
}

// covers reports whether cert has every SAN req asks for (more is fine).
func covers(cert *x509.Certificate, req certs.Request) bool {
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

// renewAt is when a leaf valid from notBefore to notAfter is due: once fraction of its
// lifetime has passed. The lifetime is the configured leaf lifetime, or less if the leaf is
// shorter (NotBefore is backdated for clock skew, so notAfter-notBefore overstates it). A leaf
// capped at its CA's expiry is never due (ok false): renewing could not extend it.
func renewAt(notBefore, notAfter, caNotAfter time.Time, leaf time.Duration, fraction float64) (time.Time, bool) {
	if !notAfter.Before(caNotAfter) {
		return time.Time{}, false
	}
	l := min(leaf, notAfter.Sub(notBefore))
	return notAfter.Add(-time.Duration((1 - fraction) * float64(l))), true
}

// apply carries out pl on p: issues the leaves, renders the kubeconfigs, and sets a new
// Serial, NextRotation and Ready. It clears a rotation request.
func (b *bundler) apply(p *api.ClusterPKI, cas map[string]*certs.KeyPair, t target, pl plan) error {
	if p.Certs == nil {
		p.Certs = map[string]api.CertBundle{}
	}
	issued := map[string]*certs.KeyPair{}
	for _, l := range t.leaves {
		if pl.leaves[l.Name] == "" {
			continue
		}
		req := l.Req
		req.Lifetime = t.life.Leaf
		kp, err := cas[l.CA].Issue(req)
		if err != nil {
			return fmt.Errorf("issue %s: %w", l.Name, err)
		}
		if p.Certs[l.Name], err = b.certBundle(kp); err != nil {
			return err
		}
		issued[l.Name] = kp
	}
	if pl.kubeconfigs != "" {
		if p.Kubeconfigs == nil {
			p.Kubeconfigs = map[string][]byte{}
		}
		for _, k := range kubeconfigSpecs {
			client := issued[k.Cert]
			if client == nil {
				var err error
				if client, err = b.keyPair(p.Certs[k.Cert]); err != nil {
					return fmt.Errorf("kubeconfig %s: open %s: %w", k.Name, k.Cert, err)
				}
			}
			keyPEM, err := client.KeyPEM()
			if err != nil {
				return err
			}
			kc, err := kube.Kubeconfig(kube.KubeconfigSpec{
				Server:        t.server,
				CAPEM:         cas[api.CertRootCA].CertPEM(),
				ClientCertPEM: client.CertPEM(),
				ClientKeyPEM:  keyPEM,
				ClusterName:   t.cluster,
				UserName:      k.User,
			})
			if err != nil {
				return fmt.Errorf("kubeconfig %s: %w", k.Name, err)
			}
			p.Kubeconfigs[k.Name] = b.seal.Seal(kc)
		}
		p.KubeconfigServer = t.server
	}
	if pl.encryption != "" {
		k, err := b.newEncryptionKey()
		if err != nil {
			return err
		}
		p.SecretEncryption = &api.EncryptionKeys{Type: t.encryption, Keys: []api.EncryptionKey{k}}
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	p.Serial = serial
	p.RotationRequestedAt = nil
	p.Ready = true
	p.NextRotation = b.nextRotation(p, cas, t)
	return nil
}

// nextRotation is the earliest time a leaf of p is due (zero if none ever is).
func (b *bundler) nextRotation(p *api.ClusterPKI, cas map[string]*certs.KeyPair, t target) time.Time {
	var next time.Time
	for _, l := range t.leaves {
		cb, ok := p.Certs[l.Name]
		ca := cas[l.CA]
		if !ok || ca == nil {
			continue
		}
		at, ok := renewAt(cb.NotBefore, cb.NotAfter, ca.Cert.NotAfter, t.life.Leaf, b.fraction)
		if ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next.UTC()
}

// certBundle seals kp's key and describes its certificate.
func (b *bundler) certBundle(kp *certs.KeyPair) (api.CertBundle, error) {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return api.CertBundle{}, err
	}
	return api.CertBundle{
		CertPEM:   kp.CertPEM(),
		SealedKey: b.seal.Seal(keyPEM),
		Subject:   kp.Cert.Subject.String(),
		Issuer:    kp.Cert.Issuer.String(),
		NotBefore: kp.Cert.NotBefore.UTC(),
		NotAfter:  kp.Cert.NotAfter.UTC(),
		IsCA:      kp.Cert.IsCA,
	}, nil
}

func (b *bundler) keyBundle(k *certs.SigningKey) (api.KeyBundle, error) {
	priv, err := k.PrivatePEM()
	if err != nil {
		return api.KeyBundle{}, err
	}
	pub, err := k.PublicPEM()
	if err != nil {
		return api.KeyBundle{}, err
	}
	return api.KeyBundle{PublicPEM: pub, SealedPriv: b.seal.Seal(priv)}, nil
}

// encryptionKeySize is the size of an aescbc key: 32 bytes, AES-256 (what Kubernetes
// recommends for the aescbc provider).
const encryptionKeySize = 32

// newEncryptionKey generates a random AES-256 key for kube-apiserver's aescbc provider,
// sealed, with a new name.
func (b *bundler) newEncryptionKey() (api.EncryptionKey, error) {
	key := make([]byte, encryptionKeySize)
	if _, err := rand.Read(key); err != nil {
		return api.EncryptionKey{}, fmt.Errorf("secret encryption key: %w", err)
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return api.EncryptionKey{}, fmt.Errorf("secret encryption key name: %w", err)
	}
	return api.EncryptionKey{
		Name:      "key-" + hex.EncodeToString(id[:]),
		Sealed:    b.seal.Seal(key),
		CreatedAt: time.Now().UTC().Truncate(time.Second),
	}, nil
}

// keyPair opens a stored certificate and its sealed key.
func (b *bundler) keyPair(cb api.CertBundle) (*certs.KeyPair, error) {
	keyPEM, err := b.seal.Open(cb.SealedKey)
	if err != nil {
		return nil, err
	}
	return certs.ParseKeyPair(cb.CertPEM, keyPEM)
}

// status is the public view of p: no key material.
func status(p *api.ClusterPKI) api.PKIStatus {
	s := api.PKIStatus{
		Cluster:             p.Name,
		Ready:               p.Ready,
		Serial:              p.Serial,
		NextRotation:        p.NextRotation,
		RotationRequestedAt: p.RotationRequestedAt,
		Message:             p.Message,
		Certificates:        make([]api.CertInfo, 0, len(p.Certs)),
	}
	for name, cb := range p.Certs {
		s.Certificates = append(s.Certificates, api.CertInfo{
			Name: name, Subject: cb.Subject, Issuer: cb.Issuer,
			NotBefore: cb.NotBefore, NotAfter: cb.NotAfter, IsCA: cb.IsCA,
		})
	}
	sort.Slice(s.Certificates, func(i, j int) bool { return s.Certificates[i].Name < s.Certificates[j].Name })
	if e := p.SecretEncryption; e != nil {
		s.SecretEncryption = &api.SecretEncryptionStatus{Type: e.Type, Keys: make([]api.EncryptionKeyInfo, len(e.Keys)), Rotation: e.Rotation}
		for i, k := range e.Keys {
			s.SecretEncryption.Keys[i] = api.EncryptionKeyInfo{Name: k.Name, CreatedAt: k.CreatedAt, Active: i == 0}
		}
	}
	return s
}

// newSerial returns a random id for ClusterPKI.Serial.
func newSerial() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("serial: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
