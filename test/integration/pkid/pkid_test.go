package pkid_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostplane/hostplane/test/integration/stack"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/pkid"
)

const wait = 30 * time.Second

// issuers is which CA signs each leaf, as the components expect it.
var issuers = map[string]string{
	api.CertEtcdServer:          api.CertEtcdCA,
	api.CertEtcdPeer:            api.CertEtcdCA,
	api.CertAPIServerEtcdClient: api.CertEtcdCA,
	api.CertAPIServer:           api.CertRootCA,
	api.CertAPIServerKubelet:    api.CertRootCA,
	api.CertFrontProxyClient:    api.CertFrontProxyCA,
	api.CertAdmin:               api.CertRootCA,
	api.CertControllerManager:   api.CertRootCA,
	api.CertScheduler:           api.CertRootCA,
	api.CertIgnitionServer:      api.CertRootCA,
	api.CertKarpenter:           api.CertRootCA,
}

var caNames = []string{api.CertRootCA, api.CertEtcdCA, api.CertFrontProxyCA, api.CertKubeletSigner}

// harness is one embedded NATS with stand-ins for clusterd, infrad and componentd: the test
// writes their records and publishes their events, as those daemons would.
type harness struct {
	*stack.Env
	clusters     *store.Store[api.Cluster]
	infra        *store.Store[api.Infra]
	controlplane *store.Store[api.ControlPlaneComponent]
	pki          *store.Store[api.ClusterPKI]
	infrad       *bus.Publisher
	componentd   *bus.Publisher
	events       *eventLog
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st := stack.New(t, stack.Options{})
	h := &harness{Env: st, events: &eventLog{},
		clusters:     stack.Bucket[api.Cluster](st, bus.BucketClusters),
		infra:        stack.Bucket[api.Infra](st, bus.BucketInfra),
		controlplane: stack.Bucket[api.ControlPlaneComponent](st, bus.BucketControlPlane),
		pki:          stack.Bucket[api.ClusterPKI](st, bus.BucketPKI),
		infrad:       bus.NewPublisher(st.NATS.JS, "infrad"),
		componentd:   bus.NewPublisher(st.NATS.JS, "componentd"),
	}
	sub, err := st.NATS.Conn.Subscribe(events.ResourceFilter(events.ResourcePKI), h.events.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return h
}

// pkidProc is one running pkid daemon.
type pkidProc struct {
	d    *pkid.Daemon
	reg  *prometheus.Registry
	url  string
	stop func()
}

func (h *harness) startPKID(cfg pkid.Config) *pkidProc {
	h.T.Helper()
	reg := observe.NewRegistry()
	mgmt, clk := cfg.ManagementKubeconfig, cfg.Clock
	cfg.Base = h.Base(pkid.Name, reg)
	cfg.ManagementKubeconfig, cfg.Clock = mgmt, clk
	d, err := pkid.New(cfg)
	if err != nil {
		h.T.Fatal(err)
	}
	stop, addr := h.Run("pkid", d)
	return &pkidProc{d: d, reg: reg, url: "http://" + addr, stop: stop}
}

func (h *harness) createCluster(name string, spec *api.PKISpec) {
	h.T.Helper()
	c := stack.Cluster(name, "1.34.4", api.SingleReplica)
	c.Spec.PKI = spec
	h.CreateCluster(c)
}

func sampleInfra(name string) api.Infra {
	return api.Infra{
		ObjectMeta:             api.ObjectMeta{Name: name},
		ClusterGeneration:      1,
		Platform:               api.PlatformLocal,
		Endpoint:               api.Endpoint{Host: "10.20.30.40", Port: 6443},
		APIServers:             []api.Endpoint{{Host: "127.0.0.1", Port: 16443}},
		Etcd:                   []api.EtcdMember{{Name: "etcd-0", Host: "etcd-0.demo.internal", ClientPort: 12379, PeerPort: 12380}},
		ControllerManagerPorts: []int{10257},
		SchedulerPorts:         []int{10259},
		Ready:                  true,
	}
}

// putInfra writes inf as infrad would and publishes infra.ready.
func (h *harness) putInfra(inf api.Infra) {
	h.T.Helper()
	_, _, err := h.infra.Mutate(h.Ctx, inf.Name, false, func(v *api.Infra) error { *v = inf; return nil })
	if errors.Is(err, store.ErrNotFound) {
		_, err = h.infra.Create(h.Ctx, inf.Name, &inf)
	}
	if err != nil {
		h.T.Fatal(err)
	}
	h.publish(h.infrad, inf.Name, events.ResourceInfra, "ready")
}

func (h *harness) publish(p *bus.Publisher, cluster string, res events.Resource, verb string) {
	h.T.Helper()
	if _, err := p.Publish(h.Ctx, cluster, res, verb, cluster, nil); err != nil {
		h.T.Fatal(err)
	}
}

// waitPKI waits for the cluster's PKI record to satisfy cond and returns it.
func (h *harness) waitPKI(name, what string, cond func(*api.ClusterPKI) bool) *api.ClusterPKI {
	h.T.Helper()
	var got *api.ClusterPKI
	testenv.Eventually(h.T, wait, func() bool {
		p, _, err := h.pki.Get(h.Ctx, name)
		if err != nil {
			return false
		}
		got = p
		return cond(p)
	}, "pki of %s: %s", name, what)
	return got
}

func (h *harness) issued(name string) *api.ClusterPKI {
	h.T.Helper()
	return h.waitPKI(name, "ready and announced", func(p *api.ClusterPKI) bool {
		return p.Ready && h.events.announced(name, p.Serial)
	})
}

func (h *harness) sealKey() *certs.SealKey {
	h.T.Helper()
	k, err := certs.LoadOrCreateSealKey(filepath.Join(h.DataDir, pkid.SealKeyFileName))
	if err != nil {
		h.T.Fatal(err)
	}
	return k
}

func TestPKI_WhenInfraIsReady_IssuesChainedCertsWithSealedKeysAndKubeconfigs(t *testing.T) {
	h := newHarness(t)
	h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	notReady := sampleInfra("demo")
	notReady.Ready = false
	h.putInfra(notReady)
	h.putInfra(sampleInfra("demo"))

	p := h.issued("demo")
	seal := h.sealKey()

	if p.ClusterGeneration != 1 || p.Serial == "" || p.NextRotation.IsZero() {
		t.Errorf("generation %d serial %q next rotation %v", p.ClusterGeneration, p.Serial, p.NextRotation)
	}
	for _, name := range caNames {
		cb := p.Certs[name]
		c := parseCert(t, cb.CertPEM)
		if !c.IsCA || !cb.IsCA {
			t.Errorf("%s is not a CA", name)
		}
		if d := time.Until(c.NotAfter); d < 9*365*24*time.Hour {
			t.Errorf("%s expires in %v, want about 10 years", name, d)
		}
		checkSealedKey(t, seal, name, cb)
	}
	for leaf, ca := range issuers {
		cb, ok := p.Certs[leaf]
		if !ok {
			t.Errorf("no %s certificate", leaf)
			continue
		}
		c := parseCert(t, cb.CertPEM)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, p.Certs[ca].CertPEM), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s does not chain to %s: %v", leaf, ca, err)
		}
		if d := time.Until(c.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
			t.Errorf("%s expires in %v, want about 1 year", leaf, d)
		}
		checkSealedKey(t, seal, leaf, cb)
	}

	apiserver := parseCert(t, p.Certs[api.CertAPIServer].CertPEM)
	for _, host := range []string{"10.20.30.40", "127.0.0.1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default.svc.cluster.local"} {
		if _, err := apiserver.Verify(x509.VerifyOptions{DNSName: host, Roots: pool(t, p.Certs[api.CertRootCA].CertPEM)}); err != nil {
			t.Errorf("apiserver serving cert does not cover %s: %v", host, err)
		}
	}
	etcdServer := parseCert(t, p.Certs[api.CertEtcdServer].CertPEM)
	for _, host := range []string{"etcd-0.demo.internal", "127.0.0.1", "localhost"} {
		if err := etcdServer.VerifyHostname(host); err != nil {
			t.Errorf("etcd serving cert does not cover %s: %v", host, err)
		}
	}
	for name, org := range map[string]string{api.CertAdmin: "system:masters", api.CertAPIServerKubelet: "system:masters"} {
		if c := parseCert(t, p.Certs[name].CertPEM); !slices.Contains(c.Subject.Organization, org) {
			t.Errorf("%s subject %v lacks O=%s", name, c.Subject, org)
		}
	}
	for name, cn := range map[string]string{api.CertControllerManager: "system:kube-controller-manager", api.CertScheduler: "system:kube-scheduler"} {
		if c := parseCert(t, p.Certs[name].CertPEM); c.Subject.CommonName != cn {
			t.Errorf("%s CN = %q, want %q", name, c.Subject.CommonName, cn)
		}
	}

	// Service-account key pair.
	if bytes.Contains(p.ServiceAccount.SealedPriv, []byte("PRIVATE KEY")) {
		t.Error("service-account private key is stored in plaintext")
	}
	saPriv, err := seal.Open(p.ServiceAccount.SealedPriv)
	if err != nil {
		t.Fatalf("open service-account key: %v", err)
	}
	sa, err := certs.ParseSigningKey(saPriv)
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := sa.PublicPEM(); !bytes.Equal(pub, p.ServiceAccount.PublicPEM) {
		t.Error("service-account public key does not match its private key")
	}

	// The guest's Secret encryption key: 32 random bytes, sealed.
	if e := p.SecretEncryption; e == nil || e.Type != api.SecretEncryptionAESCBC || len(e.Keys) != 1 {
		t.Errorf("secret encryption keys = %+v, want one aescbc key", e)
	} else if key, err := seal.Open(e.Keys[0].Sealed); err != nil || len(key) != 32 {
		t.Errorf("secret encryption key %s opens to %d bytes (%v), want 32", e.Keys[0].Name, len(key), err)
	}

	// Kubeconfigs: sealed, pointing at the endpoint with the root CA.
	for _, name := range []string{api.KubeconfigAdmin, api.KubeconfigControllerMgr, api.KubeconfigScheduler, api.KubeconfigKarpenter} {
		sealed := p.Kubeconfigs[name]
		if bytes.Contains(sealed, []byte("apiVersion")) || bytes.Contains(sealed, []byte("BEGIN")) {
			t.Errorf("kubeconfig %s is stored in plaintext", name)
		}
		raw, err := seal.Open(sealed)
		if err != nil {
			t.Fatalf("open kubeconfig %s: %v", name, err)
		}
		rc, err := kube.RESTConfig(raw)
		if err != nil {
			t.Fatalf("kubeconfig %s does not parse: %v", name, err)
		}
		if rc.Host != "https://10.20.30.40:6443" {
			t.Errorf("kubeconfig %s server = %q", name, rc.Host)
		}
		if !bytes.Equal(rc.CAData, p.Certs[api.CertRootCA].CertPEM) {
			t.Errorf("kubeconfig %s does not trust the root CA", name)
		}
		if name == api.KubeconfigAdmin {
			c := parseCert(t, rc.CertData)
			if !slices.Contains(c.Subject.Organization, "system:masters") {
				t.Errorf("admin kubeconfig user %v is not in system:masters", c.Subject)
			}
			if _, err := certs.ParseKeyPair(rc.CertData, rc.KeyData); err != nil {
				t.Errorf("admin kubeconfig key pair: %v", err)
			}
		}
	}
	if n := h.events.count("demo", pkid.VerbReady); n != 1 {
		t.Errorf("pki.ready published %d times, want 1", n)
	}
}

func TestPKI_GetShowsEveryCertificateWithoutKeyMaterial(t *testing.T) {
	h := newHarness(t)
	d := h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	h.putInfra(sampleInfra("demo"))
	p := h.issued("demo")

	code, body, ctype := httpDo(t, http.MethodGet, d.url+"/v1/clusters/demo/pki")
	if code != http.StatusOK {
		t.Fatalf("GET pki: %d %s", code, body)
	}
	for _, secret := range []string{"PRIVATE", "BEGIN", "sealed", "kubeconfig"} {
		if strings.Contains(strings.ToLower(string(body)), strings.ToLower(secret)) {
			t.Errorf("GET pki answer contains %q:\n%s", secret, body)
		}
	}
	var st api.PKIStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Cluster != "demo" || !st.Ready || st.Serial != p.Serial || st.NextRotation.IsZero() {
		t.Errorf("status = %+v", st)
	}
	if e := st.SecretEncryption; e == nil || e.Type != api.SecretEncryptionAESCBC || len(e.Keys) != 1 ||
		e.Keys[0].Name != p.SecretEncryption.Keys[0].Name || !e.Keys[0].Active {
		t.Errorf("status secretEncryption = %+v, want the active key %s", e, p.SecretEncryption.Keys[0].Name)
	}
	var names []string
	for _, c := range st.Certificates {
		names = append(names, c.Name)
		if c.Subject == "" || c.Issuer == "" || c.NotAfter.IsZero() {
			t.Errorf("certificate %+v is missing fields", c)
		}
	}
	want := append(slices.Clone(caNames), slices.Collect(maps.Keys(issuers))...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("certificates = %v, want %v", names, want)
	}

	code, body, ctype = httpDo(t, http.MethodGet, d.url+"/v1/clusters/nope/pki")
	if code != http.StatusNotFound || !strings.HasPrefix(ctype, "application/problem+json") {
		t.Errorf("GET unknown cluster's pki: %d %s %s", code, ctype, body)
	}
	code, _, _ = httpDo(t, http.MethodPost, d.url+"/v1/clusters/nope/pki/rotate")
	if code != http.StatusNotFound {
		t.Errorf("POST rotate of an unknown cluster: %d, want 404", code)
	}
}

func TestPKI_WhenLeavesAreDue_RenewsThemAndPublishesRotated(t *testing.T) {
	h := newHarness(t)
	clk := clocktesting.NewFakeClock(time.Now())
	d := h.startPKID(pkid.Config{Base: daemon.Base{Clock: clk}})
	h.createCluster("demo", &api.PKISpec{LeafLifetime: "1h", CALifetime: "not-a-duration"})
	h.putInfra(sampleInfra("demo"))
	first := h.issued("demo")

	if ca := parseCert(t, first.Certs[api.CertRootCA].CertPEM); time.Until(ca.NotAfter) < 9*365*24*time.Hour {
		t.Errorf("an invalid caLifetime did not fall back to the 10 year default: CA expires %v", ca.NotAfter)
	}
	// A leaf is due after two thirds of its lifetime (the default RenewFraction): the next
	// rotation is the earliest leaf's, 20 minutes before it expires.
	var due time.Time // when every leaf is due
	for leaf := range issuers {
		at := first.Certs[leaf].NotAfter.Add(-20 * time.Minute)
		if at.Before(first.NextRotation) {
			t.Errorf("%s is due at %v, before the next rotation %v", leaf, at, first.NextRotation)
		}
		if at.After(due) {
			due = at
		}
	}
	if due.Sub(first.NextRotation) > 5*time.Second {
		t.Errorf("next rotation %v is not when the leaves are due, about %v", first.NextRotation, due)
	}
	// pkid renews when its clock says so, not on the certificates' real age. The reconcile
	// queue's timer runs on the real clock, so infra.ready (the infra unchanged) has pkid
	// look at the cluster again.
	clk.SetTime(due)
	h.putInfra(sampleInfra("demo"))
	renewed := h.waitPKI("demo", "renewed", func(p *api.ClusterPKI) bool {
		return p.Serial != first.Serial && h.events.announced("demo", p.Serial)
	})
	testenv.Eventually(t, wait, func() bool { return h.events.count("demo", pkid.VerbRotated) > 0 }, "pki.rotated published")
	for _, ca := range caNames {
		if !bytes.Equal(renewed.Certs[ca].CertPEM, first.Certs[ca].CertPEM) {
			t.Errorf("CA %s was rotated; CAs are not", ca)
		}
	}
	for leaf, ca := range issuers {
		if bytes.Equal(renewed.Certs[leaf].CertPEM, first.Certs[leaf].CertPEM) {
			t.Errorf("leaf %s was not renewed", leaf)
		}
		c := parseCert(t, renewed.Certs[leaf].CertPEM)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, renewed.Certs[ca].CertPEM), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("renewed %s does not chain to %s: %v", leaf, ca, err)
		}
	}
	if bytes.Equal(renewed.Kubeconfigs[api.KubeconfigAdmin], first.Kubeconfigs[api.KubeconfigAdmin]) {
		t.Error("admin kubeconfig was not re-rendered with the renewed client certificate")
	}
	// pkid counts a rotation once its write is done, and the event it sent can reach this
	// test first.
	testenv.Eventually(t, wait, func() bool {
		return metricValue(t, d.reg, "hostplane_pki_rotations_total", map[string]string{"cluster": "demo"}) >= 1
	}, "hostplane_pki_rotations_total counts the renewal")
	if v := metricValue(t, d.reg, "hostplane_pki_cert_expiry_seconds", map[string]string{"cluster": "demo", "cert": api.CertRootCA}); v < 9*365*24*3600 {
		t.Errorf("root CA expiry gauge = %v s", v)
	}
}

func TestPKI_RotateRequest_RenewsEveryLeafButNoCA(t *testing.T) {
	h := newHarness(t)
	d := h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	h.putInfra(sampleInfra("demo"))
	first := h.issued("demo")

	code, body, _ := httpDo(t, http.MethodPost, d.url+"/v1/clusters/demo/pki/rotate")
	if code != http.StatusAccepted {
		t.Fatalf("POST rotate: %d %s", code, body)
	}
	renewed := h.waitPKI("demo", "rotated on request", func(p *api.ClusterPKI) bool {
		return p.Serial != first.Serial && p.RotationRequestedAt == nil && h.events.announced("demo", p.Serial)
	})
	for leaf := range issuers {
		if bytes.Equal(renewed.Certs[leaf].CertPEM, first.Certs[leaf].CertPEM) {
			t.Errorf("leaf %s was not renewed", leaf)
		}
	}
	for _, ca := range caNames {
		if !bytes.Equal(renewed.Certs[ca].CertPEM, first.Certs[ca].CertPEM) {
			t.Errorf("CA %s changed", ca)
		}
	}
	// The renewal moved the next one: the alert on overdue renewals reads this gauge.
	want := float64(renewed.NextRotation.UnixMilli()) / 1e3
	testenv.Eventually(t, wait, func() bool {
		return metricValue(t, d.reg, "hostplane_pki_next_rotation_timestamp_seconds", map[string]string{"cluster": "demo"}) == want
	}, "hostplane_pki_next_rotation_timestamp_seconds is not the renewed PKI's next rotation %v (%v)", renewed.NextRotation, want)
	if want <= float64(first.NextRotation.Unix()) {
		t.Errorf("the next rotation %v did not move past the first one %v", renewed.NextRotation, first.NextRotation)
	}
	// The request also starts a Secret encryption key rotation: the new key is listed
	// second, so the key that encrypted everything so far stays active (and every key stays
	// readable) until kube-apiserver runs with the new one (no componentd here: it waits).
	e := renewed.SecretEncryption
	if e == nil || len(e.Keys) != 2 || !reflect.DeepEqual(e.Keys[0], first.SecretEncryption.Keys[0]) ||
		e.Rotation == nil || e.Rotation.Phase != api.RotationKeyAdded || e.Rotation.Key != e.Keys[1].Name {
		t.Errorf("secret encryption after a rotate request: %+v, want the old key first, a new one second and the rotation at KeyAdded", e)
	}
	code, body, _ = httpDo(t, http.MethodGet, d.url+"/v1/clusters/demo/pki")
	var st api.PKIStatus
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.SecretEncryption == nil ||
		st.SecretEncryption.Rotation == nil || !strings.Contains(st.SecretEncryption.Rotation.Message, "waiting for kube-apiserver") {
		t.Errorf("GET pki during the key rotation: %d %s", code, body)
	}
	testenv.Eventually(t, wait, func() bool { return h.events.count("demo", pkid.VerbRotated) == 1 }, "one pki.rotated")
}

func TestPKI_WhenEndpointMoves_ReissuesServingCertAndKubeconfigs(t *testing.T) {
	h := newHarness(t)
	h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	h.putInfra(sampleInfra("demo"))
	first := h.issued("demo")

	moved := sampleInfra("demo")
	moved.Endpoint = api.Endpoint{Host: "api.demo.example", Port: 7443}
	h.putInfra(moved)
	p := h.waitPKI("demo", "serving cert covers the new endpoint", func(p *api.ClusterPKI) bool {
		return p.Serial != first.Serial && h.events.announced("demo", p.Serial)
	})
	if err := parseCert(t, p.Certs[api.CertAPIServer].CertPEM).VerifyHostname("api.demo.example"); err != nil {
		t.Errorf("apiserver cert: %v", err)
	}
	if p.KubeconfigServer != "https://api.demo.example:7443" {
		t.Errorf("kubeconfig server = %q", p.KubeconfigServer)
	}
	raw, err := h.sealKey().Open(p.Kubeconfigs[api.KubeconfigAdmin])
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := kube.RESTConfig(raw); err != nil || rc.Host != "https://api.demo.example:7443" {
		t.Errorf("admin kubeconfig server = %v (%v)", rc, err)
	}
	// Only what the endpoint concerns changes.
	for _, name := range []string{api.CertEtcdServer, api.CertEtcdPeer, api.CertAdmin, api.CertRootCA} {
		if !bytes.Equal(p.Certs[name].CertPEM, first.Certs[name].CertPEM) {
			t.Errorf("%s was reissued though the endpoint does not concern it", name)
		}
	}
	testenv.Eventually(t, wait, func() bool { return h.events.count("demo", pkid.VerbRotated) == 1 }, "one pki.rotated")
}

func TestPKI_OnClusterDeletion_WaitsForControlPlaneKeysThenDeletes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete func(h *harness)
	}{
		{"deletion timestamp", func(h *harness) { h.MarkClusterDeleting("demo") }},
		{"cluster key gone", func(h *harness) {
			if err := h.clusters.Delete(h.Ctx, "demo", 0); err != nil {
				h.T.Fatal(err)
			}
			h.PublishCluster("demo", "deleted")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			d := h.startPKID(pkid.Config{})
			h.createCluster("demo", nil)
			h.putInfra(sampleInfra("demo"))
			h.issued("demo")
			if _, err := h.controlplane.Create(h.Ctx, "demo.etcd", &api.ControlPlaneComponent{
				ObjectMeta: api.ObjectMeta{Name: "etcd"}, Cluster: "demo",
			}); err != nil {
				t.Fatal(err)
			}

			tc.delete(h)
			p := h.waitPKI("demo", "says it waits for the components", func(p *api.ClusterPKI) bool {
				return strings.Contains(p.Message, "demo.etcd")
			})
			if !p.Ready {
				t.Error("pki is no longer ready while components still run")
			}
			code, body, _ := httpDo(t, http.MethodGet, d.url+"/v1/clusters/demo/pki")
			if code != http.StatusOK || !strings.Contains(string(body), "waiting") {
				t.Errorf("GET pki while waiting: %d %s", code, body)
			}

			if err := h.controlplane.Delete(h.Ctx, "demo.etcd", 0); err != nil {
				t.Fatal(err)
			}
			h.publish(h.componentd, "demo", events.ResourceComponent, "deleted")
			testenv.Eventually(t, wait, func() bool {
				_, _, err := h.pki.Get(h.Ctx, "demo")
				return errors.Is(err, store.ErrNotFound)
			}, "pki key deleted")
			testenv.Eventually(t, wait, func() bool { return h.events.count("demo", pkid.VerbDeleted) == 1 }, "pki.deleted published")
			if code, _, _ := httpDo(t, http.MethodGet, d.url+"/v1/clusters/demo/pki"); code != http.StatusNotFound {
				t.Errorf("GET pki after deletion: %d, want 404", code)
			}
		})
	}
}

func TestPKI_AfterRestart_KeepsTheIssuedBundle(t *testing.T) {
	h := newHarness(t)
	first := h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	h.putInfra(sampleInfra("demo"))
	before := h.issued("demo")
	first.stop()

	h.startPKID(pkid.Config{})
	h.putInfra(sampleInfra("demo")) // an event the new pkid must reconcile
	seq := h.lastEventSeq()
	testenv.Eventually(t, wait, func() bool {
		info, err := h.NATS.JS.Consumer(h.Ctx, "HOSTPLANE_EVENTS", pkid.Name)
		if err != nil {
			return false
		}
		ci, err := info.Info(h.Ctx)
		return err == nil && ci.AckFloor.Stream >= seq
	}, "the restarted pkid reconciled the infra event")

	after, _, err := h.pki.Get(h.Ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if after.Serial != before.Serial || !bytes.Equal(after.Certs[api.CertAPIServer].CertPEM, before.Certs[api.CertAPIServer].CertPEM) {
		t.Errorf("restart reissued the pki: serial %s → %s", before.Serial, after.Serial)
	}
	if n := h.events.count("demo", pkid.VerbReady) + h.events.count("demo", pkid.VerbRotated); n != 1 {
		t.Errorf("%d pki events after a restart, want only the first pki.ready", n)
	}
}

// lastEventSeq is the stream sequence of the newest event.
func (h *harness) lastEventSeq() uint64 {
	h.T.Helper()
	s, err := h.NATS.JS.Stream(h.Ctx, events.EventsStream)
	if err != nil {
		h.T.Fatal(err)
	}
	info, err := s.Info(h.Ctx)
	if err != nil {
		h.T.Fatal(err)
	}
	return info.State.LastSeq
}

// eventLog records every pki event seen on NATS: its subject and the serial it announces.
type eventLog struct {
	mu      sync.Mutex
	subs    []string
	serials []string
}

func (l *eventLog) record(m *nats.Msg) {
	var data struct{ Serial string }
	if ev, err := events.Decode(m.Data); err == nil && len(ev.Data) > 0 {
		_ = ev.DecodeData(&data)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = append(l.subs, m.Subject)
	l.serials = append(l.serials, data.Serial)
}

// announced reports whether a pki.ready or pki.rotated of cluster announced serial.
func (l *eventLog) announced(cluster, serial string) bool {
	ready, _ := events.Subject(cluster, events.ResourcePKI, pkid.VerbReady)
	rotated, _ := events.Subject(cluster, events.ResourcePKI, pkid.VerbRotated)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.subs {
		if (s == ready || s == rotated) && l.serials[i] == serial {
			return true
		}
	}
	return false
}

func (l *eventLog) count(cluster, verb string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	want, _ := events.Subject(cluster, events.ResourcePKI, verb)
	n := 0
	for _, s := range l.subs {
		if s == want {
			n++
		}
	}
	return n
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := certs.ParseCertificate(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(parseCert(t, caPEM))
	return p
}

func checkSealedKey(t *testing.T, seal *certs.SealKey, name string, cb api.CertBundle) {
	t.Helper()
	if bytes.Contains(cb.SealedKey, []byte("PRIVATE KEY")) || bytes.Contains(cb.SealedKey, []byte("BEGIN")) {
		t.Errorf("%s: private key stored in plaintext", name)
	}
	keyPEM, err := seal.Open(cb.SealedKey)
	if err != nil {
		t.Errorf("%s: sealed key does not open: %v", name, err)
		return
	}
	if _, err := certs.ParseKeyPair(cb.CertPEM, keyPEM); err != nil {
		t.Errorf("%s: key pair: %v", name, err)
	}
}

func httpDo(t *testing.T, method, url string) (int, []byte, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header.Get("Content-Type")
}

// metricValue is the value of the series of name with labels (every other label ignored).
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := testenv.Metric(t, g, name, labels)
	return v
}

func TestPKI_IncompleteRecord_IsReissuedButKeepsTheSecretEncryptionKey(t *testing.T) {
	h := newHarness(t)
	h.startPKID(pkid.Config{})
	h.createCluster("demo", nil)
	h.putInfra(sampleInfra("demo"))
	first := h.issued("demo")

	// A damaged record (no service-account key) is issued anew, but the guest's etcd holds
	// Secrets encrypted with its key: that key must survive.
	if _, _, err := h.pki.Mutate(h.Ctx, "demo", false, func(p *api.ClusterPKI) error {
		p.ServiceAccount = api.KeyBundle{}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.putInfra(sampleInfra("demo")) // an event wakes pkid
	p := h.waitPKI("demo", "reissued", func(p *api.ClusterPKI) bool {
		return len(p.ServiceAccount.PublicPEM) > 0 && p.Serial != first.Serial
	})
	if bytes.Equal(p.Certs[api.CertRootCA].CertPEM, first.Certs[api.CertRootCA].CertPEM) {
		t.Error("the incomplete record was not issued anew")
	}
	if !reflect.DeepEqual(p.SecretEncryption, first.SecretEncryption) {
		t.Errorf("secret encryption keys after the reissue: %+v, want %+v", p.SecretEncryption, first.SecretEncryption)
	}
}
